package main

import (
	"log/slog"

	"github.com/ipledger/ipledger/auth"
	"github.com/ipledger/ipledger/web"
)

// identityOf builds the server's identity settings (docs/identity.md):
// the OIDC relying party (discovery starts in the background: an issuer
// that does not answer never stops the server), the trusted proxy, the
// client certificate roles and the TLS files (read once here, so a
// missing or broken file stops the start).
func identityOf(cfg config, log *slog.Logger) (web.Identity, *auth.TLSFiles, error) {
	roles := auth.NewRoleMap(cfg.AdminGroups, cfg.OperatorGroups, cfg.ViewerGroups)
	id := web.Identity{OIDCName: cfg.OIDCName, NoTokenLogin: !cfg.TokenLogin, ClientRoles: cfg.TLSClientRoles, SessionTTL: cfg.SessionTTL}
	if (cfg.OIDCIssuer != "" || cfg.ProxyHeader != "") && roles.Empty() {
		log.Warn("no group is mapped to a role: every person signing in will be refused (set IPLEDGER_ROLE_ADMIN_GROUPS, _OPERATOR_GROUPS or _VIEWER_GROUPS)")
	}
	if cfg.OIDCIssuer != "" {
		id.OIDC = auth.NewOIDC(auth.OIDCConfig{
			Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret,
			ExternalURL: cfg.ExternalURL, Scopes: cfg.OIDCScopes, GroupsClaim: cfg.OIDCGroupsClaim,
			UsernameClaim: cfg.OIDCUsernameClaim, APIAudience: cfg.OIDCAPIAudience, Roles: roles, Log: log,
		})
		log.Info("single sign-on configured", "issuer", cfg.OIDCIssuer, "redirect_uri", id.OIDC.RedirectURL())
	}
	if cfg.ProxyHeader != "" {
		id.Proxy = &auth.Proxy{UserHeader: cfg.ProxyHeader, GroupsHeader: cfg.ProxyGroupsHeader, Trusted: cfg.ProxyTrusted, Roles: roles, LogoutURL: cfg.ProxyLogoutURL}
	}
	var tlsFiles *auth.TLSFiles
	if cfg.TLSCert != "" {
		tlsFiles = &auth.TLSFiles{CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey, ClientCAFile: cfg.TLSClientCA, Log: log}
		if err := tlsFiles.Load(); err != nil {
			return id, nil, err
		}
	}
	return id, tlsFiles, nil
}
