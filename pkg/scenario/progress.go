package scenario

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// progressBar draws one line per run: pods created, bound and done.
type progressBar struct {
	out         io.Writer
	interactive bool
	label       string
	lastPrint   time.Time
	lastLine    string
}

const barWidth = 24

func (b *progressBar) show(elapsed time.Duration, created, bound, done, total int) {
	if b.out == nil {
		return
	}
	if total == 0 {
		total = 1
	}
	filled := min(barWidth, done*barWidth/total)
	line := fmt.Sprintf("%-34s [%s%s] %6.1fs  %d/%d created  %d bound  %d done",
		b.label, strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled),
		elapsed.Seconds(), created, total, bound, done)
	b.lastLine = line
	if b.interactive {
		fmt.Fprintf(b.out, "\r%s\x1b[K", line)
		return
	}
	if time.Since(b.lastPrint) >= 10*time.Second {
		b.lastPrint = time.Now()
		fmt.Fprintln(b.out, line)
	}
}

func (b *progressBar) finish() {
	if b.out == nil || b.lastLine == "" {
		return
	}
	if b.interactive {
		fmt.Fprintf(b.out, "\r%s\x1b[K\n", b.lastLine)
		return
	}
	fmt.Fprintln(b.out, b.lastLine)
}
