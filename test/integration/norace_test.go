//go:build !race

package integration

// raceSlowdown: see race_test.go.
const raceSlowdown = 1
