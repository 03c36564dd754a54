package handlers

import (
	"bufio"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// writeItems answers 200 {"items": [...]} writing one item at a time, so
// that a list of tens of thousands of records (a replace-all's answer) is
// not built in memory as a whole first; the bytes are those c.JSON
// would write.
func writeItems[T any](c echo.Context, items []T) error {
	res := c.Response()
	res.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	res.WriteHeader(http.StatusOK)
	w := bufio.NewWriterSize(res, 64<<10)
	if _, err := w.WriteString(`{"items":[`); err != nil {
		return err
	}
	for i := range items {
		if i > 0 {
			if err := w.WriteByte(','); err != nil {
				return err
			}
		}
		b, err := json.Marshal(&items[i])
		if err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if _, err := w.WriteString("]}\n"); err != nil {
		return err
	}
	return w.Flush()
}
