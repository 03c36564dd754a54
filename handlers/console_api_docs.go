package handlers

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ipledger/ipledger/views"
)

// APIDocs: GET /api-docs — the REST API's OpenAPI document rendered by
// the vendored Swagger UI.
func (h *Console) APIDocs(c echo.Context) error {
	return render(c, http.StatusOK, views.APIDocsPage(h.page(c, "API", "api")))
}
