//go:build !race

package e2ecoordinated

const raceEnabled = false
