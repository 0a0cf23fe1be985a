//go:build race

package collector

// raceEnabled is true in a build with the race detector.
const raceEnabled = true
