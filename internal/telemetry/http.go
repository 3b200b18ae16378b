package telemetry

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// traced reports whether HTTPHandler instruments a request: not probes and
// scrapes, which arrive every few seconds and say nothing about the work.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return false
	}
	return true
}

// router finds the route of a request without serving it; *http.ServeMux
// implements it.
type router interface {
	Handler(r *http.Request) (h http.Handler, pattern string)
}

// HTTPHandler wraps h in otelhttp server instrumentation: a server span per
// request, continuing the caller's W3C trace context (p.Propagator, default
// propagation.TraceContext), and the http.server.* request metrics, whose
// labels include the route but not the path.
//
// Spans are named "METHOD route" after the route pattern the request matched
// (Go 1.22+ http.Request.Pattern, as set by an http.ServeMux that h reaches
// with the same request), for example "POST /v1/assignments/{task}/submit",
// never after the raw path, so task ids stay out of span names; a request no
// route matched is named by its method alone. The route is the http.route
// attribute too. When h is itself an *http.ServeMux, the name is right from
// the span's start; otherwise it is set once h returns.
//
// Requests for /healthz, /readyz and /metrics are passed through untraced.
// With nil or no-op providers, h is returned as is.
func HTTPHandler(h http.Handler, p *Providers) http.Handler {
	if p == nil || (!tracing(p.TracerProvider) && !metering(p.MeterProvider)) {
		return h
	}
	rt, _ := h.(router)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		// A ServeMux sets Pattern on the request it was given: this one.
		if route := httpRoute(r.Pattern); route != "" {
			trace.SpanFromContext(r.Context()).SetAttributes(semconv.HTTPRoute(route))
		}
	})
	opts := []otelhttp.Option{
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			pattern := r.Pattern
			if pattern == "" && rt != nil {
				_, pattern = rt.Handler(r)
			}
			return spanName(r.Method, pattern)
		}),
		otelhttp.WithFilter(traced),
	}
	if tracing(p.TracerProvider) {
		opts = append(opts, otelhttp.WithTracerProvider(p.TracerProvider))
	} else {
		opts = append(opts, otelhttp.WithTracerProvider(tracenoop.NewTracerProvider()))
	}
	if metering(p.MeterProvider) {
		opts = append(opts, otelhttp.WithMeterProvider(p.MeterProvider))
	} else {
		opts = append(opts, otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()))
	}
	prop := p.Propagator
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	opts = append(opts, otelhttp.WithPropagators(prop))
	return otelhttp.NewHandler(inner, "taskd.http", opts...)
}

// spanName is "METHOD route" for a request that matched pattern, or
// "METHOD" alone when it matched none. Methods other than the standard ones
// become "HTTP", so that clients cannot mint span names.
func spanName(method, pattern string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
	default:
		method = "HTTP"
	}
	if route := httpRoute(pattern); route != "" {
		return method + " " + route
	}
	return method
}

// httpRoute is the path part of a ServeMux pattern ("POST
// host/v1/tasks/{id}" has "/v1/tasks/{id}"), or "" for no pattern.
func httpRoute(pattern string) string {
	if i := strings.IndexByte(pattern, '/'); i >= 0 {
		return pattern[i:]
	}
	return ""
}
