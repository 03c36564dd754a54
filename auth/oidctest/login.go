package oidctest

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Authorize walks a browser's way through the provider without a browser:
// from authURL (the provider's authorization URL, or a page of the relying
// party that redirects to it) through the login form with username and
// password, and returns the URL the provider finally redirects to — the
// relying party's callback with code and state — without requesting it.
// c must have a cookie jar; its redirects are followed here, one by one.
func (p *Provider) Authorize(c *http.Client, authURL, username, password string) (*url.URL, error) {
	cc := *c
	cc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	next := authURL
	for range 10 {
		resp, err := cc.Get(next)
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		u := resp.Request.URL
		switch {
		case resp.StatusCode >= 300 && resp.StatusCode < 400:
			loc, err := u.Parse(resp.Header.Get("Location"))
			if err != nil {
				return nil, err
			}
			if !strings.HasPrefix(loc.String(), p.Issuer) {
				return loc, nil
			}
			next = loc.String()
		case strings.HasPrefix(u.String(), p.Issuer+"/login/username"):
			return p.submit(&cc, u.Query().Get("authRequestID"), username, password)
		default:
			return nil, fmt.Errorf("GET %s: %s: %.300s", u, resp.Status, body)
		}
	}
	return nil, fmt.Errorf("too many redirects from %s", authURL)
}

func (p *Provider) submit(c *http.Client, id, username, password string) (*url.URL, error) {
	next := p.Issuer + "/login/username"
	resp, err := c.PostForm(next, url.Values{"id": {id}, "username": {username}, "password": {password}})
	for range 10 {
		if err != nil {
			return nil, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode >= 400 {
			return nil, fmt.Errorf("the provider's login answered %s: %.300s", resp.Status, body)
		}
		loc, perr := resp.Request.URL.Parse(resp.Header.Get("Location"))
		if perr != nil {
			return nil, perr
		}
		if !strings.HasPrefix(loc.String(), p.Issuer) {
			return loc, nil
		}
		resp, err = c.Get(loc.String())
	}
	return nil, fmt.Errorf("too many redirects after the login form")
}
