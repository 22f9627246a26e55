// The API docs (Swagger UI, served by this server, no CDN). "Try it out" sends the key the
// web page was given in this tab, if any, as X-API-Key.
"use strict";

SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  presets: [SwaggerUIBundle.presets.apis],
  layout: "BaseLayout",
  requestInterceptor: request => {
    const key = sessionStorage.getItem("graphrag-api-key");
    if (key) request.headers["X-API-Key"] = String.fromCharCode(...new TextEncoder().encode(key));
    return request;
  },
});
