package ordered

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestFirstTakesTheReadyChannelsInTheOrderGiven(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, b, c := make(chan struct{}, 1), make(chan time.Time, 1), make(chan int, 1)
	c <- 3
	b <- time.Time{}
	a <- struct{}{}
	var got []int
	for range 3 {
		got = append(got, First(a, b, c))
	}
	if got[0] != 0 || got[1] != 1 || got[2] != 2 {
		t.Fatalf("took %v, want [0 1 2]: the order given, not the order of the sends", got)
	}
	// Many rounds: a random pick among ready channels would show here.
	for range 1000 {
		b <- time.Time{}
		c <- 1
		if i := First(a, b, c); i != 1 {
			t.Fatalf("took channel %d with b and c ready, want b (1)", i)
		}
		<-c
	}
}

func TestFirstBlocksUntilOneIsReadyAndIgnoresNilChannels(t *testing.T) {
	defer goleak.VerifyNone(t)
	var never chan struct{}
	late := make(chan string)
	go func() {
		time.Sleep(10 * time.Millisecond)
		late <- "x"
	}()
	if i := First(never, late); i != 1 {
		t.Fatalf("woke on channel %d, want the one that became ready (1)", i)
	}
}

func TestFirstReportsAClosedChannelAsReady(t *testing.T) {
	done := make(chan struct{})
	close(done)
	if i := First(make(chan int), done); i != 1 {
		t.Fatalf("took %d, want the closed channel (1)", i)
	}
}

func TestFirstRefusesWhatIsNotAChannel(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("First accepted an int as a channel")
		}
	}()
	First(make(chan int), 3)
}
