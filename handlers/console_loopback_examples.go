package handlers

import (
	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/allocator"
	"github.com/ipledger/ipledger/fault"
	"github.com/ipledger/ipledger/views"
)

// loopbackExamples reads lo-ip and lo-ip-v6 for the placeholders of the
// ExpectedMachine form's loopback fields, so that a site is shown its own
// addresses; a pool that does not exist yet gives the neutral example.
func (h *Console) loopbackExamples(c echo.Context) (views.LoopbackExamples, error) {
	var pools [2]*allocator.Pool
	for i, name := range []string{allocator.PoolLoopbackV4, allocator.PoolLoopbackV6} {
		p, err := h.A.GetPool(Ctx(c), name)
		if e, ok := fault.AsError(err); ok && e.Code == fault.CodeNotFound {
			continue
		}
		if err != nil {
			return views.LoopbackExamples{}, err
		}
		pools[i] = p
	}
	return views.NewLoopbackExamples(pools[0], pools[1]), nil
}
