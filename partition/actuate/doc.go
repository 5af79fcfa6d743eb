// Package actuate makes the epoch controller's autoscaling act: it starts
// and stops GPU backends so that the cluster has the GPUs the parts want,
// plus a warm pool of idle ones ready for the next scale-out.
//
// The epoch controller (partition/live) sizes the parts each epoch
// (partition/epoch: Decision.Record.GPUs is the GPUs the parts want in
// total) and moves existing backends between the parts and the free pool;
// that alone never changes how many backends run. This package closes the
// loop:
//
//   - Policy turns the wanted GPUs at each epoch into a number of backends
//     to run: grow at once, shrink only once the want has stayed lower for
//     a delay, within bounds. It is pure: it reads no clock and does no
//     I/O, so it is unit-tested by hand.
//   - Actuator starts and stops backends: Process runs them in this
//     process (the emulated cluster of `symphony-bench demo`), Kubernetes
//     scales a StatefulSet or a Deployment through its scale subresource.
//   - Autoscaler joins the two: the controller calls Apply once per epoch.
//
// A backend an actuator starts registers itself (live.RunBackend) and
// parks in the free pool until the controller gives it to a part; one it
// stops deregisters, and the next epoch sees the cluster without it.
package actuate
