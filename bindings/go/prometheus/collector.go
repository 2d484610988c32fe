// Package prometheus exposes a redquorum Client's metrics as a prometheus.Collector. It is a
// module of its own, so that the redquorum module does not depend on Prometheus:
//
//	prometheus.MustRegister(redlockprom.NewCollector(client))
//
// Each scrape takes one Client.Stats snapshot (atomic reads, no network) and hands over its
// metrics as they are: redlock_acquire_duration_seconds, redlock_acquisitions_total,
// redlock_lost_total, redlock_node_up, ... (redquorum's docs/observability.md lists them).
package prometheus

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	redquorum "github.com/redquorum/redquorum/bindings/go"
)

// Collector collects one client's metrics; a closed client has none. Register one per
// client: two clients' metrics have the same names.
type Collector struct {
	client *redquorum.Client
}

// NewCollector returns the collector of client's metrics.
func NewCollector(client *redquorum.Client) *Collector {
	return &Collector{client: client}
}

// Describe sends nothing: the metrics are known at each scrape (an unchecked collector), as
// the nodes' labels are.
func (c *Collector) Describe(chan<- *prometheus.Desc) {}

// Collect sends the metrics of one Stats snapshot; nothing once the client is closed.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	s, err := c.client.Stats()
	if err != nil {
		return
	}
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(strings.NewReader(s.Prometheus))
	if err != nil {
		ch <- prometheus.NewInvalidMetric(prometheus.NewDesc("redlock_error", "redlock stats", nil, nil), err)
		return
	}
	for _, family := range families {
		for _, m := range family.GetMetric() {
			if metric, err := convert(family, m); err == nil {
				ch <- metric
			} else {
				ch <- prometheus.NewInvalidMetric(prometheus.NewDesc(family.GetName(), family.GetHelp(), nil, nil), err)
			}
		}
	}
}

// convert turns one parsed sample (with its family's name, help and type) into a constant
// metric.
func convert(family *dto.MetricFamily, m *dto.Metric) (prometheus.Metric, error) {
	names := make([]string, 0, len(m.GetLabel()))
	values := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		names = append(names, l.GetName())
		values = append(values, l.GetValue())
	}
	desc := prometheus.NewDesc(family.GetName(), family.GetHelp(), names, nil)
	switch family.GetType() {
	case dto.MetricType_COUNTER:
		return prometheus.NewConstMetric(desc, prometheus.CounterValue, m.GetCounter().GetValue(), values...)
	case dto.MetricType_GAUGE:
		return prometheus.NewConstMetric(desc, prometheus.GaugeValue, m.GetGauge().GetValue(), values...)
	case dto.MetricType_HISTOGRAM:
		h := m.GetHistogram()
		buckets := make(map[float64]uint64, len(h.GetBucket()))
		for _, b := range h.GetBucket() {
			buckets[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		return prometheus.NewConstHistogram(desc, h.GetSampleCount(), h.GetSampleSum(), buckets, values...)
	default:
		return prometheus.NewConstMetric(desc, prometheus.UntypedValue, m.GetUntyped().GetValue(), values...)
	}
}
