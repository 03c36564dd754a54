// Package static embeds the console's static files (served under /static/,
// public): the hand-written stylesheet and scripts, htmx vendored from the
// npm package htmx.org and Swagger UI from swagger-ui-dist (see README.md
// for the versions).
package static

import "embed"

// FS holds app.css, app.js, api-docs.js, favicon.svg, htmx.min.js, Swagger UI and their
// licenses.
//
//go:embed *.css *.js *.svg *.LICENSE
var FS embed.FS
