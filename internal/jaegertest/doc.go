// Package jaegertest holds the test that shows taskd's traces as an
// operator sees them: a real Jaeger v2 (all-in-one, in-memory storage) on
// loopback ports, a real `taskd serve` exporting to it over OTLP/HTTP with
// every trace sampled, and every assertion made through Jaeger's query API.
//
// The package has no code of its own. Jaeger is pinned by the module in
// tool/ (github.com/jaegertracing/jaeger/cmd/jaeger as a Go tool), a module
// apart so that taskd's go.mod does not depend on it; scripts/jaeger.sh
// builds it once into ${XDG_CACHE_HOME:-$HOME/.cache}/taskd/jaeger-VERSION.
// `make test-jaeger` builds it and runs the test with the services up.
//
// The test skips unless TASKD_JAEGER names the Jaeger binary, and fails
// instead when TASKD_TEST_REQUIRE_JAEGER=1; it needs the test Redis and
// MariaDB as the other integration tests do (TASKD_TEST_REDIS_URL,
// TASKD_TEST_MYSQL_DSN).
package jaegertest
