//go:build race

package diagnosis

const raceEnabled = true
