// Package static embeds the console's static files (served under /static/,
// public): the hand-written stylesheet and script, and htmx vendored from
// the npm package htmx.org (see README.md for the version).
package static

import "embed"

// FS holds app.css, app.js, htmx.min.js and its license.
//
//go:embed *.css *.js *.LICENSE
var FS embed.FS
