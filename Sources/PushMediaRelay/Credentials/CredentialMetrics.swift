import Prometheus

/// The held credentials' metrics, straight in the Prometheus registry (made once per name and labels).
package enum CredentialMetric {
    case pushes, daysLeft, reloads, reloadFailed

    var descriptor: MetricNameDescriptor {
        let (name, unit, help) =
            switch self {
            case .pushes:
                (
                    "pushmedia_relay_credential_pushes", "total",
                    "Pushes and messages sent with a held credential, by relay and entry name"
                )
            case .daysLeft:
                (
                    "pushmedia_relay_certificate_days_left", "",
                    "Whole days until a held APNs certificate expires (negative: expired)"
                )
            case .reloads:
                ("pushmedia_relay_credentials_reloads", "total", "Reloads of the credentials file on SIGHUP, by result")
            case .reloadFailed:
                (
                    "pushmedia_relay_credentials_reload_failed", "",
                    "1 while the last reload of the credentials file failed (the old set is in force)"
                )
            }
        return MetricNameDescriptor(metricName: name, unitName: unit, helpText: help)
    }
}

extension RelayMetrics {
    /// The counter of a held credential's metric with `labels`.
    func counter(_ metric: CredentialMetric, _ labels: [(String, String)]) -> Prometheus.Counter {
        registry.makeCounter(descriptor: metric.descriptor, labels: labels)
    }

    /// The gauge of a held credential's metric with `labels`.
    func gauge(_ metric: CredentialMetric, _ labels: [(String, String)] = []) -> Prometheus.Gauge {
        labels.isEmpty
            ? registry.makeGauge(descriptor: metric.descriptor)
            : registry.makeGauge(descriptor: metric.descriptor, labels: labels)
    }
}
