// The console's API page: Swagger UI (vendored, swagger-ui-bundle.js)
// rendering the REST API's OpenAPI document. "Try it out" requests go out
// with the console session; state-changing ones carry the session's CSRF
// token, read from the page's hx-headers like every htmx request.
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
        if (req.method && req.method.toUpperCase() !== "GET") {
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
