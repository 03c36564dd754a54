package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/views"
)

// Search: GET /search?q= — the header's search box (console.Search): one
// exact match redirects to its page (303), several are listed by kind.
func (h *Console) Search(c echo.Context) error {
	v := views.SearchView{Page: h.page(c, "Search", "")}
	v.Query = c.QueryParam("q")
	res, err := h.Reads.Search(Ctx(c), v.Query)
	status := http.StatusOK
	if err != nil {
		if !isFormError(err) {
			return err
		}
		v.Err, status = views.FromError(err).Get("q"), formStatus(err)
	} else {
		if hit := res.Redirect(); hit != nil {
			return c.Redirect(http.StatusSeeOther, views.HitURL(*hit))
		}
		v.Result = res
	}
	return render(c, status, views.SearchPage(v))
}
