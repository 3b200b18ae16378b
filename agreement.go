package taskd

import (
	"context"
	"time"

	"github.com/taskd/taskd/internal/agreement"
	"github.com/taskd/taskd/internal/telemetry"
	"github.com/taskd/taskd/tasks"
)

// agreementMetricsWindow is the window taskd_agreement_alpha is measured over:
// the overlap groups whose tasks were created in the last 7 days.
const agreementMetricsWindow = 7 * 24 * time.Hour

// overlapCategories are the configured categories whose tasks ask for several
// results: those agreement is measured in.
func (c Config) overlapCategories() []CategoryConfig {
	var out []CategoryConfig
	for _, cc := range c.Categories {
		if cc.Overlap > 1 {
			out = append(out, cc)
		}
	}
	return out
}

// measureAgreement is Krippendorff's alpha of each overlap category over the
// last agreementMetricsWindow, for taskd_agreement_alpha: nominal, and interval
// for a category whose agreement_metric is interval; an undefined alpha is left
// out. One read of the store per category.
func (e *Engine) measureAgreement(ctx context.Context) ([]telemetry.AgreementAlpha, error) {
	now := time.Now()
	var out []telemetry.AgreementAlpha
	for _, cc := range e.cfg.overlapCategories() {
		vs, err := e.store.Agreement(ctx, tasks.AgreementParams{Category: cc.Name, Since: now.Add(-agreementMetricsWindow), Until: now})
		if err != nil {
			return nil, err
		}
		rs := make([]agreement.Rating, len(vs.Values))
		for i, v := range vs.Values {
			rs[i] = agreement.Rating{Unit: v.GroupID, Coder: v.EditorID, Value: v.Value}
		}
		s := agreement.Summarize(agreement.Units(rs), vs.Interval)
		if s.Nominal.Defined {
			out = append(out, telemetry.AgreementAlpha{Category: cc.Name, Metric: agreement.Nominal.String(), Value: s.Nominal.Value})
		}
		if s.Interval != nil && s.Interval.Defined {
			out = append(out, telemetry.AgreementAlpha{Category: cc.Name, Metric: agreement.Interval.String(), Value: s.Interval.Value})
		}
	}
	return out, nil
}

// goldMetricsWindow is the window taskd_gold_accuracy is measured over: the
// gold answers of the last 7 days.
const goldMetricsWindow = 7 * 24 * time.Hour

// measureGold is the share of correct gold answers per category over the last
// goldMetricsWindow, for taskd_gold_accuracy; a category without answers is
// left out. One read of the store (gold_copies_answered's range of the window).
func (e *Engine) measureGold(ctx context.Context) ([]telemetry.GoldAccuracy, error) {
	rows, err := e.store.GoldAccuracy(ctx, tasks.GoldAccuracyParams{Since: time.Now().Add(-goldMetricsWindow)})
	if err != nil {
		return nil, err
	}
	return goldByCategory(rows), nil
}

// goldByCategory sums each category's answers over its editors, in the order
// of rows' first mention.
func goldByCategory(rows []tasks.GoldAccuracy) []telemetry.GoldAccuracy {
	var out []telemetry.GoldAccuracy
	sums := map[string][2]int{}
	for _, r := range rows {
		s, seen := sums[r.Category]
		if !seen {
			out = append(out, telemetry.GoldAccuracy{Category: r.Category})
		}
		sums[r.Category] = [2]int{s[0] + r.Correct, s[1] + r.Answers}
	}
	kept := out[:0]
	for _, a := range out {
		if s := sums[a.Category]; s[1] > 0 {
			a.Value = float64(s[0]) / float64(s[1])
			kept = append(kept, a)
		}
	}
	return kept
}
