//go:build race

package integration

// raceSlowdown scales the latency bounds the tests hold the scheduler to
// (waitBoundWithin): the race detector slows it several times. The run
// without it holds the figures as stated.
const raceSlowdown = 3
