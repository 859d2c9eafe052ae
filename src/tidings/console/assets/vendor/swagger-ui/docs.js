// /docs: Swagger UI over this broker's own /openapi.json (no other host is asked for anything).
window.ui = SwaggerUIBundle({ url: "/openapi.json", dom_id: "#ui" });
