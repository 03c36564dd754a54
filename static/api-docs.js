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
  function start() {
    window.SwaggerUIBundle({
      url: "/api/v1/openapi.json",
      dom_id: "#swagger-ui",
      deepLinking: true,
      presets: [window.SwaggerUIBundle.presets.apis],
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
