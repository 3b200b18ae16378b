package webhook

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSignVerify(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	body := []byte(`{"id":1}`)
	sig := Sign("s3cret-0123456789", now, body)
	if sig != "t=1700000000,v1="+sig[len("t=1700000000,v1="):] || len(sig) != len("t=1700000000,v1=")+64 {
		t.Fatalf("signature %q", sig)
	}
	for _, tc := range []struct {
		name, secret, header string
		body                 []byte
		at                   time.Time
		tolerance            time.Duration
		want                 error
	}{
		{"good", "s3cret-0123456789", sig, body, now, 0, nil},
		{"good, late within tolerance", "s3cret-0123456789", sig, body, now.Add(4 * time.Minute), 0, nil},
		{"good among others", "s3cret-0123456789", "t=1700000000,v1=00ff," + sig[len("t=1700000000,"):], body, now, 0, nil},
		{"wrong secret", "other-secret-0123", sig, body, now, 0, ErrBadSignature},
		{"body changed", "s3cret-0123456789", sig, []byte(`{"id":2}`), now, 0, ErrBadSignature},
		{"timestamp changed", "s3cret-0123456789", "t=1700000001" + sig[len("t=1700000000"):], body, now, 0, ErrBadSignature},
		{"too old", "s3cret-0123456789", sig, body, now.Add(6 * time.Minute), 0, ErrTooOld},
		{"from the future", "s3cret-0123456789", sig, body, now.Add(-time.Hour), time.Minute, ErrTooOld},
		{"long tolerance", "s3cret-0123456789", sig, body, now.Add(time.Hour), 2 * time.Hour, nil},
		{"negative tolerance", "s3cret-0123456789", sig, body, now, -1, ErrNegativeTolerance},
		{"negative tolerance, too old", "s3cret-0123456789", sig, body, now.Add(time.Hour), -time.Minute, ErrNegativeTolerance},
		{"empty secret", "", Sign("", now, body), body, now, 0, ErrNoSecret},
		{"empty secret, no header", "", "", body, now, 0, ErrNoSecret},
		{"empty", "s3cret-0123456789", "", body, now, 0, ErrNoSignature},
		{"no v1", "s3cret-0123456789", "t=1700000000", body, now, 0, ErrNoSignature},
		{"no t", "s3cret-0123456789", sig[len("t=1700000000,"):], body, now, 0, ErrNoSignature},
	} {
		if err := Verify(tc.secret, tc.header, tc.body, tc.tolerance, tc.at); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v, want %v", tc.name, err, tc.want)
		}
	}
	// The refusals say what to pass instead.
	if err := Verify("s3cret-0123456789", sig, body, -time.Minute, now); err == nil || !strings.Contains(err.Error(), "pass 0 for ToleranceDefault") || !strings.Contains(err.Error(), "-1m0s") {
		t.Errorf("a negative tolerance: %v", err)
	}
	if err := Verify("", sig, body, 0, now); err == nil || !strings.Contains(err.Error(), "empty secret") {
		t.Errorf("an empty secret: %v", err)
	}
}
