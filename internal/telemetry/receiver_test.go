package telemetry_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// receivedSpan is a span an OTLP receiver got, with its scope and resource.
type receivedSpan struct {
	*tracepb.Span
	scope    string
	resource *resourcepb.Resource
}

// attr returns the value of the span attribute key, or nil.
func (s receivedSpan) attr(key string) *commonpb.AnyValue { return findAttr(s.Attributes, key) }

func (s receivedSpan) traceID() string  { return hex.EncodeToString(s.TraceId) }
func (s receivedSpan) spanID() string   { return hex.EncodeToString(s.SpanId) }
func (s receivedSpan) parentID() string { return hex.EncodeToString(s.ParentSpanId) }

func findAttr(attrs []*commonpb.KeyValue, key string) *commonpb.AnyValue {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return nil
}

// spanSink stores the spans of export requests.
type spanSink struct {
	mu    sync.Mutex
	spans []receivedSpan
}

func (s *spanSink) add(req *collectortrace.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, sp := range ss.Spans {
				s.spans = append(s.spans, receivedSpan{Span: sp, scope: ss.GetScope().GetName(), resource: rs.Resource})
			}
		}
	}
}

// all returns the spans received so far.
func (s *spanSink) all() []receivedSpan {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]receivedSpan(nil), s.spans...)
}

// grpcReceiver is an OTLP/gRPC trace receiver.
type grpcReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	sink *spanSink
}

func (r *grpcReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	r.sink.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// startGRPCReceiver serves an OTLP/gRPC trace receiver on a free loopback
// port until the test ends, and returns its host:port.
func startGRPCReceiver(t *testing.T) (string, *spanSink) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	sink := &spanSink{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, &grpcReceiver{sink: sink})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String(), sink
}

// startHTTPReceiver serves an OTLP/HTTP trace receiver (protobuf on POST
// /v1/traces) on a loopback port until the test ends, and returns its URL.
func startHTTPReceiver(t *testing.T) (string, *spanSink) {
	t.Helper()
	sink := &spanSink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		data, err := io.ReadAll(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sink.add(&req)
		resp, err := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = io.Copy(w, bytes.NewReader(resp))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, sink
}
