package main

import (
	"testing"
	"time"
)

func TestHoldUntil(t *testing.T) {
	now := time.Date(2026, 11, 23, 1, 35, 0, 0, time.UTC)
	for _, tc := range []struct {
		name, hold string
		n          int
		want       time.Time
		wantErr    bool
	}{
		{name: "no hold", hold: "", n: 1000},
		{name: "smaller fleet runs now", hold: "1000@02:05", n: 300},
		{name: "large fleet waits", hold: "1000@02:05", n: 1000, want: time.Date(2026, 11, 23, 2, 5, 0, 0, time.UTC)},
		{name: "larger fleet waits too", hold: "1000@02:05", n: 3000, want: time.Date(2026, 11, 23, 2, 5, 0, 0, time.UTC)},
		{name: "a time just passed does not wait a day", hold: "1000@01:30", n: 1000, want: time.Date(2026, 11, 23, 1, 30, 0, 0, time.UTC)},
		{name: "a later time today waits", hold: "1000@13:00", n: 1000, want: time.Date(2026, 11, 23, 13, 0, 0, 0, time.UTC)},
		{name: "bad size", hold: "x@02:05", n: 1000, wantErr: true},
		{name: "bad time", hold: "1000@2h", n: 1000, wantErr: true},
		{name: "no separator", hold: "1000", n: 1000, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := holdUntil(tc.hold, tc.n, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %t", err, tc.wantErr)
			}
			if !got.Equal(tc.want) {
				t.Errorf("holdUntil(%q, %d) = %s, want %s", tc.hold, tc.n, got, tc.want)
			}
		})
	}
}
