package scenario

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
)

// palette colours the lines of a chart.
var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

const (
	panelW, panelH = 420, 180
	marginL        = 44
	marginT        = 28
	gapX, gapY     = 40, 56
)

// WriteSVG draws, per profile, utilization over time (top row) and queue
// dominant shares over time (bottom row, when the scenario has queues).
func WriteSVG(w io.Writer, rep *Report) error {
	withShares := hasQueues(rep)
	for _, r := range rep.Results {
		for _, p := range r.Series {
			if len(p.Shares) > 0 {
				withShares = true
			}
		}
	}
	cols := len(rep.Results)
	rowsN := 1
	if withShares {
		rowsN = 2
	}
	width := marginL + cols*(panelW+gapX)
	height := 40 + rowsN*(panelH+gapY)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="14">%s — utilization and queue shares over time (wall seconds, speedup %gx)</text>`+"\n", marginL, esc(rep.Scenario), rep.Speedup)
	maxT := 0.0
	for _, r := range rep.Results {
		if n := len(r.Series); n > 0 {
			maxT = math.Max(maxT, r.Series[n-1].Seconds)
		}
	}
	if maxT == 0 {
		maxT = 1
	}
	for c, r := range rep.Results {
		x0 := marginL + c*(panelW+gapX)
		y0 := 40
		util := map[string][][2]float64{}
		shares := map[string][][2]float64{}
		for _, p := range r.Series {
			for k, v := range p.Utilization {
				util[shortName(k)] = append(util[shortName(k)], [2]float64{p.Seconds, v})
			}
			for k, v := range p.Shares {
				shares[k] = append(shares[k], [2]float64{p.Seconds, v})
			}
		}
		panel(&b, x0, y0, r.Profile+": utilization", util, maxT)
		if withShares {
			panel(&b, x0, y0+panelH+gapY, r.Profile+": queue dominant share", shares, maxT)
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func shortName(k string) string {
	if s := shortNames[k]; s != "" {
		return s
	}
	return k
}

// panel draws one chart of lines with values in [0, 1].
func panel(b *strings.Builder, x0, y0 int, title string, lines map[string][][2]float64, maxT float64) {
	top := y0 + marginT
	h := panelH - marginT
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", x0, y0+12, esc(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#999"/>`+"\n", x0, top, panelW, h)
	for _, f := range []float64{0, 0.5, 1} {
		y := float64(top) + float64(h)*(1-f)
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>`+"\n", x0, y, x0+panelW, y)
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n", x0-4, y+4, f*100)
	}
	for i := 0; i <= 4; i++ {
		t := maxT * float64(i) / 4
		x := float64(x0) + float64(panelW)*float64(i)/4
		fmt.Fprintf(b, `<text x="%.1f" y="%d" text-anchor="middle">%.0fs</text>`+"\n", x, top+h+14, t)
	}
	names := make([]string, 0, len(lines))
	for k := range lines {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, name := range names {
		color := palette[i%len(palette)]
		var pts []string
		for _, p := range lines[name] {
			x := float64(x0) + float64(panelW)*p[0]/maxT
			y := float64(top) + float64(h)*(1-math.Min(1, math.Max(0, p[1])))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", color, strings.Join(pts, " "))
		lx := x0 + 8 + i*70
		fmt.Fprintf(b, `<rect x="%d" y="%d" width="10" height="3" fill="%s"/><text x="%d" y="%d">%s</text>`+"\n", lx, top+h+22, color, lx+14, top+h+27, esc(name))
	}
}

func esc(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	return r.Replace(s)
}
