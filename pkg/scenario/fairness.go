package scenario

import "math"

// summarizeFairness fills the fairness metrics from the samples.
func (r *Result) summarizeFairness(s *Scenario, o *observer) {
	weights := map[string]int32{}
	for _, q := range s.Queues {
		weights[q.Name] = q.Weight
	}
	shareSum, deservedSum := map[string]float64{}, map[string]float64{}
	contended := 0
	for i, smp := range o.samples {
		deserved, isContended := waterFill(smp.demands, weights)
		if !isContended {
			continue
		}
		contended++
		if i > 0 {
			r.ContendedSeconds += (smp.at - o.samples[i-1].at).Seconds()
		}
		for q, d := range deserved {
			shareSum[q] += smp.shares[q]
			deservedSum[q] += d
		}
	}
	r.JainIndex = 1
	if contended == 0 {
		return
	}
	r.QueueShares = map[string]QueueShare{}
	var normalized []float64
	for q := range shareSum {
		qs := QueueShare{Weight: weights[q], Share: shareSum[q] / float64(contended), Deserved: deservedSum[q] / float64(contended)}
		r.QueueShares[q] = qs
		r.MaxShareDeviation = math.Max(r.MaxShareDeviation, math.Abs(qs.Share-qs.Deserved))
		w := float64(qs.Weight)
		if w <= 0 {
			w = 1
		}
		normalized = append(normalized, qs.Share/w)
	}
	r.JainIndex = jain(normalized)
}

// waterFill divides a cluster of size 1 among queues with demands (as
// dominant shares) by weight: each queue gets at most its demand, and what
// one leaves is shared by the others by weight. It says whether the
// queues were contended: at least two queues want something and together
// they want more than the cluster.
func waterFill(demands map[string]float64, weights map[string]int32) (map[string]float64, bool) {
	total, active := 0.0, 0
	for _, d := range demands {
		if d > 0 {
			total += d
			active++
		}
	}
	if active < 2 || total <= 1 {
		return nil, false
	}
	deserved := map[string]float64{}
	unmet := map[string]bool{}
	for q, d := range demands {
		if d > 0 {
			unmet[q] = true
			deserved[q] = 0
		}
	}
	remaining := 1.0
	for len(unmet) > 0 && remaining > 1e-9 {
		w := 0.0
		for q := range unmet {
			w += weightOf(weights, q)
		}
		given := 0.0
		for _, q := range sortedKeys(unmet) {
			add := remaining * weightOf(weights, q) / w
			if deserved[q]+add >= demands[q] {
				add = demands[q] - deserved[q]
				delete(unmet, q)
			}
			deserved[q] += add
			given += add
		}
		remaining -= given
		if given < 1e-12 {
			break
		}
	}
	return deserved, true
}

func weightOf(weights map[string]int32, q string) float64 {
	if w := weights[q]; w > 0 {
		return float64(w)
	}
	return 1
}

// jain is Jain's fairness index (Σx)²/(n·Σx²): 1 when all are equal.
func jain(x []float64) float64 {
	if len(x) == 0 {
		return 1
	}
	sum, sq := 0.0, 0.0
	for _, v := range x {
		sum += v
		sq += v * v
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(x)) * sq)
}
