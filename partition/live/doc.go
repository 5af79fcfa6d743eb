// Package live is the epoch job over a running cluster (Symphony paper
// §4.7, Appendix A): the controller that re-partitions the models across
// parts every epoch and sizes the parts, and the agents by which the
// schedulers, backends and frontends follow its decisions. They all meet
// in etcd (partition/registry); none calls another directly, so each runs
// in its own process, and any of them may restart.
//
// # Roles
//
//   - RunController measures each epoch through the parts' reports,
//     decides with the controller core the simulator drives
//     (partition/epoch), and writes the assignment and the routing table.
//   - scheduler/service/schedagent stands a part's scheduler for the
//     part's election; elected, it routes the part to itself, holds the
//     models the assignment gives the part (loading and unloading them on
//     its backends) and reports what it measured.
//   - backend/backendagent registers a backend and registers its GPUs
//     with its part's active scheduler, moving when the assignment moves
//     it or a standby takes over, and parking in the free pool.
//   - frontend/frontendagent registers a frontend and has it follow the
//     routing table, acknowledging each table once every request goes by
//     it.
//
// The agents live beside their components: the control plane's planning
// (this package, the registry, the core) moves no bytes and knows no
// running component; each component follows the registry itself.
//
// # A move, make before break
//
// The controller's assignment gives the model its new part and keeps it
// in its old one (Assignment.Keep): the new part's scheduler loads it on
// its backends. Once the new part reports it ready, the routing table
// sends its requests there; frontends switch each model only once their
// connection to the new scheduler is up, and acknowledge the table in
// their record. Once every frontend has, the assignment drops Keep and the
// old part unloads the model, which ends its queued requests first
// (service.UnloadModel). No request is refused or lost on the way.
package live
