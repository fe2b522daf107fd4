//go:build !race

package multicluster

const raceEnabled = false
