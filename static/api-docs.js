// The console's API page: Swagger UI (vendored, swagger-ui-bundle.js)
// rendering the REST API's OpenAPI document. Once the user clicks
// Authorize and pastes an API token, "Try it out" sends it as
// Authorization: Bearer, and the curl the page shows carries it. Until
// then requests go out with the console session (its cookie, which no
// curl shows): state-changing ones carry the session's CSRF token, read
// from the page's hx-headers like every htmx request — and only those, so
// the session's CSRF token never appears in a curl of an authorized
// request. The page never fills in a token itself (docs/api.md).
(function () {
  "use strict";
  function csrf() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRF-Token"] || "";
    } catch (e) {
      return "";
    }
  }
  // Once the document is loaded, Swagger UI asks its resolver for the
  // security schemes (for Authorize). On an OpenAPI 3.1 document that
  // resolver first converts the whole document (ApiDOM) — most of the
  // page's time in the browser, seconds on a busy machine, during which
  // the page drawn does not answer (docs/benchmarks.md "Console pages in
  // the browser"). A part of the document that holds no $ref is its own
  // resolution, so this plugin stores it as resolved at once; any other
  // part (an operation opened, a schema with references, security
  // schemes of type openIdConnect, whose discovery document the resolver
  // fetches) still goes to the resolver.
  function refFreeSubtrees() {
    return {statePlugins: {spec: {wrapActions: {
      requestResolvedSubtree: function (request, system) {
        return function (path) {
          var part = path[0] === "components" ? system.specSelectors.specJson().getIn(path) : null;
          var js = part && part.toJS ? part.toJS() : null;
          if (js && typeof js === "object" && JSON.stringify(js).indexOf('"$ref"') < 0 &&
              JSON.stringify(js).indexOf('"openIdConnect"') < 0) {
            return system.specActions.updateResolvedSubtree(path, js);
          }
          return request(path);
        };
      },
    }}}};
  }
  function start() {
    window.SwaggerUIBundle({
      url: "/api/v1/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      presets: [window.SwaggerUIBundle.presets.apis],
      plugins: [refFreeSubtrees],
      layout: "BaseLayout",
      requestInterceptor: function (req) {
        if (req.method && req.method.toUpperCase() !== "GET" && !req.headers.Authorization) {
          req.headers["X-CSRF-Token"] = csrf();
        }
        return req;
      },
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
