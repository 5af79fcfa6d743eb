// Package forecast predicts a model's request rate a few steps ahead, for
// predictive autoscaling.
//
// # Why
//
// Starting a GPU backend takes longer than a load swing does, so a purely
// reactive autoscaler is late exactly when it matters. MArk (§4.2) sizes
// the cluster against the largest rate predicted for the next m steps,
// recomputed every step, and notes that no predictor suits every workload,
// so the method is pluggable. This package supplies the interface and
// three simple methods: Last (persistence), SeasonalNaive and additive
// Holt-Winters; Parse builds one from a flag such as "holt-winters:1440".
//
// # Steps
//
// A step is the caller's sampling interval, normally one controller epoch:
// once per step the caller measures the rate over the step just ended and
// passes it to Observe, then asks Forecast(h) for steps 1..h after it.
// Index k of the result is the step that ends (k+1) steps from now. A
// period is counted in steps: with one-minute epochs, a daily pattern has
// period 1440. MaxOver picks the provisioning target out of a forecast,
// for example the largest rate between the step a backend started now
// would be ready and the end of the window.
//
// # Contract
//
// Forecasters are plain values: deterministic, single-threaded (the caller
// owns one from one goroutine), no clock and no I/O. Rates are in the
// caller's unit (requests per second, say) and are never negative: Observe
// clamps a negative rate to 0 and treats NaN or ±Inf as a repeat of the
// previous observation (0 before the first), so one bad measurement does
// not poison the state; every forecast is finite and >= 0. Seasonal
// methods keep O(period) state, not the history.
//
// # Plugging in a method
//
// Implement Forecaster (Observe, Forecast, Name) and hand the value to the
// controller in place of one from Parse; nothing else in the system knows
// which method runs. Honour the contract above: the controller neither
// sanitises forecasts nor copies them (the slice Forecast returns belongs
// to the caller).
package forecast
