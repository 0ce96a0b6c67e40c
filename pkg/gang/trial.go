package gang

import fwk "k8s.io/kube-scheduler/framework"

// trialStateKey marks the CycleState of a trial placement, in which the
// profile's PreFilter plugins run for a gang's other members: Muster's
// plugins stand aside there rather than plan or admit again.
const trialStateKey fwk.StateKey = "Muster/trial"

type trialMarker struct{}

func (trialMarker) Clone() fwk.StateData { return trialMarker{} }

// MarkTrial marks state as a trial placement's.
func MarkTrial(state fwk.CycleState) { state.Write(trialStateKey, trialMarker{}) }

// IsTrial reports whether state belongs to a trial placement.
func IsTrial(state fwk.CycleState) bool {
	_, err := state.Read(trialStateKey)
	return err == nil
}
