package allocator

import (
	"testing"

	"github.com/ipledger/ipledger/models"
)

// TestExplicitRangesSayWhereToReserve: a reservation outside its pool is
// answered with the pool's auto_assign=false ranges, never its automatic
// ones, or with the fact that it has none.
func TestExplicitRangesSayWhereToReserve(t *testing.T) {
	auto := models.PoolRange{FirstValue: "10.50.0.1", LastValue: "10.50.0.199", AutoAssign: true}
	a := models.PoolRange{FirstValue: "10.50.0.200", LastValue: "10.50.0.249"}
	b := models.PoolRange{FirstValue: "10.60.0.200", LastValue: "10.60.0.209"}
	for _, c := range []struct {
		ranges []models.PoolRange
		want   string
	}{
		{[]models.PoolRange{auto, a}, "reservations lie in its explicit range 10.50.0.200..10.50.0.249"},
		{[]models.PoolRange{auto, a, b}, "reservations lie in its explicit ranges 10.50.0.200..10.50.0.249, 10.60.0.200..10.60.0.209"},
		{[]models.PoolRange{auto}, "it has no explicit (auto_assign=false) range to reserve from: add one first"},
	} {
		if got := explicitRanges(c.ranges); got != c.want {
			t.Errorf("explicitRanges = %q, want %q", got, c.want)
		}
	}
}
