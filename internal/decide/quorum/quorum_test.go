package quorum

import "testing"

func TestOfAndHeadroom(t *testing.T) {
	for _, tc := range []struct{ voters, of, headroom int }{
		{0, 1, 0}, {1, 1, 0}, {2, 2, 0}, {3, 2, 1}, {4, 3, 1}, {5, 3, 2}, {6, 4, 2}, {7, 4, 3},
	} {
		if got := Of(tc.voters); got != tc.of {
			t.Errorf("Of(%d) = %d, want %d", tc.voters, got, tc.of)
		}
		if got := Headroom(tc.voters); got != tc.headroom {
			t.Errorf("Headroom(%d) = %d, want %d", tc.voters, got, tc.headroom)
		}
	}
	for n := 1; n <= 99; n++ {
		// A quorum is a strict majority: two quorums always share a voter.
		if q := Of(n); 2*q <= n || 2*(q-1) > n {
			t.Errorf("Of(%d) = %d is not the smallest strict majority", n, q)
		}
	}
}
