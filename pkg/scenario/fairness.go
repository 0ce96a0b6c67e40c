package scenario

import (
	"math"
	"slices"
	"time"
)

// summarizeFairness fills the fairness metrics from the samples.
func (r *Result) summarizeFairness(s *Scenario, o *observer) {
	weights := s.queueWeights()
	fairs := fairShares(o.samples, weights)
	shareSum, fairSum := map[string]float64{}, map[string]float64{}
	contended, jainSum := 0, 0.0
	for i, smp := range o.samples {
		fair := fairs[i]
		if fair == nil {
			continue
		}
		contended++
		if i > 0 {
			dt := (smp.at - o.samples[i-1].at).Seconds()
			r.ContendedSeconds += dt
			jainSum += dt * jain(fairFractions(smp.shares, fair))
		}
		for q, f := range fair {
			shareSum[q] += smp.shares[q]
			fairSum[q] += f
		}
	}
	r.timeToFairShare(s, o, fairs)
	r.JainIndex, r.WeightedJainIndex = 1, 1
	if r.ContendedSeconds > 0 {
		r.JainIndex = jainSum / r.ContendedSeconds
	}
	if contended == 0 {
		return
	}
	r.QueueShares = map[string]QueueShare{}
	var perWeight []float64
	for _, q := range sortedKeys(shareSum) {
		qs := QueueShare{Weight: weights[q], Share: shareSum[q] / float64(contended), Deserved: fairSum[q] / float64(contended)}
		r.QueueShares[q] = qs
		r.MaxShareDeviation = math.Max(r.MaxShareDeviation, math.Abs(qs.Share-qs.Deserved))
		perWeight = append(perWeight, qs.Share/weightOf(weights, q))
	}
	r.WeightedJainIndex = jain(perWeight)
}

// fairShares is each sample's fair shares by waterFill, nil for a sample
// without contention.
func fairShares(samples []sample, weights map[string]int32) []map[string]float64 {
	out := make([]map[string]float64, len(samples))
	for i, smp := range samples {
		if fair, contended := waterFill(smp.demands, weights); contended {
			out[i] = fair
		}
	}
	return out
}

// timeToFairShare times each burst (a workload of a queue arriving after
// the start) from its first pod's creation to the first sample, taken
// once every pod of its first arrival exists, at which every queue is
// within the tolerance of its fair share; a sample without contention is
// fair. Until the end of the run, unreached, when there is none. A
// workload whose pods never appeared (the run ended first) is no burst.
func (r *Result) timeToFairShare(s *Scenario, o *observer, fairs []map[string]float64) {
	tol := s.fairShareTolerance()
	for _, w := range s.bursts() {
		created := o.createdSinceStart(w.Name)
		if len(created) == 0 {
			continue
		}
		first, whole := created[0], created[min(w.firstArrivalPods(), len(created))-1]
		b := FairShareBurst{Workload: w.Name, Queue: w.Queue, ArrivalSeconds: first.Seconds(), SecondsToFair: r.WallSeconds - first.Seconds()}
		for i, smp := range o.samples {
			if smp.at >= whole && atFairShares(smp.shares, fairs[i], tol) {
				b.SecondsToFair, b.Reached = (smp.at - first).Seconds(), true
				break
			}
		}
		r.FairShareBursts = append(r.FairShareBursts, b)
		r.TimeToFairShareSeconds = math.Max(r.TimeToFairShareSeconds, b.SecondsToFair)
	}
}

// atFairShares says whether every queue's share is within tol of its fair
// share; nil fair shares (no contention) are met.
func atFairShares(shares, fair map[string]float64, tol float64) bool {
	for q, f := range fair {
		if math.Abs(shares[q]-f) > tol {
			return false
		}
	}
	return true
}

// createdSinceStart is when the workload's pods were created, after the
// run's start, in order.
func (o *observer) createdSinceStart(workload string) []time.Duration {
	var out []time.Duration
	for _, p := range o.pods {
		if p.workload == workload {
			out = append(out, p.created.Sub(o.start))
		}
	}
	slices.Sort(out)
	return out
}

// queueWeights is each queue's weight.
func (s *Scenario) queueWeights() map[string]int32 {
	weights := map[string]int32{}
	for _, q := range s.Queues {
		weights[q.Name] = q.Weight
	}
	return weights
}

// fairFractions is, over the queues with a fair share, each one's share ÷
// its fair share: Jain's x, the allocation against the fair allocation.
func fairFractions(shares, fair map[string]float64) []float64 {
	x := make([]float64, 0, len(fair))
	for _, q := range sortedKeys(fair) {
		if fair[q] > 0 {
			x = append(x, shares[q]/fair[q])
		}
	}
	return x
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

// jain is Jain's fairness index (Σx)²/(n·Σx²): 1 when all are equal, 1/n
// when one holds everything; 1 for none or all zero (no one is favoured).
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
