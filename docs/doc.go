// Package docs holds no code. Its tests hold the repository's references
// to the docs to what the docs say: every citation of a heading — a
// Markdown file's name (docs/operations.md, README.md) or a link to it,
// then the heading in double quotes — names a file that exists and a
// heading it has, at any level; every link to an anchor of a Markdown
// file names a heading's anchor as GitHub makes it. Code comments and
// strings, the docs, the README, ARCHITECTURE.md, CONTRIBUTING.md and the
// deploy, k8s and scripts folders are read, so a heading renamed without
// its citations fails `go test ./...`.
package docs
