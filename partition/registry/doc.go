// Package registry is the live cluster's state in etcd: the processes
// (schedulers, backends, frontends) registered under leases, the models,
// the controller's part assignment and the routing table frontends follow,
// the parts' reports and the controller's last epoch.
//
// # Key layout
//
// Everything lives under one prefix P (Config.Prefix, DefaultPrefix
// "/symphony/"); Keys spells it:
//
//	P schedulers/<part>/<name>  Scheduler   leased: gone one TTL after its process dies
//	P backends/<name>           Backend     leased
//	P frontends/<name>          Frontend    leased
//	P models/<name>             Model       no lease
//	P assignment                Assignment  one key, written with a revision check
//	P routes                    Routes      one key, written with a revision check
//	P elections/<part>/<lease>  Scheduler   leased: a candidate for the part's election
//	P reports/<part>            Report      leased by the part's active scheduler
//	P epoch                     Epoch       the controller's last decision
//
// Values are compact JSON (readable with etcdctl), read by a strict
// decoder (Decode): one object, only the record's fields spelled exactly,
// no repeated key, nothing after it, then the record's Validate. The
// assignment and the routing table are each one key, so that a reader sees
// a whole table at one revision and a watch delivers whole tables in
// revision order; at about 40 bytes a model, 2,000 models are 80 kB, far
// under etcd's 1.5 MiB value limit.
//
// # Versioning and liveness
//
// A process's record is put under its own lease and kept alive
// (Register); when the process dies the keep-alives stop and etcd deletes
// the record one TTL later, which every watcher of the prefix sees.
// PutAssignment and PutRoutes are transactions that compare the key's mod
// revision with the one the writer read, so of two controllers only one
// write lands and the other gets ErrConflict. WatchRoutes delivers every
// change of the routing table once, in revision order, and resumes from a
// revision.
//
// # Scheduler election
//
// Each part has one active scheduler and standbys, chosen by
// concurrency.Election on P elections/<part>/ (Campaign). A candidate
// registers as a standby and puts its election key under the same lease,
// so a dead process leaves both one TTL later; the key with the least
// create revision leads, and that revision is its term. The elected
// scheduler's record becomes active with Revision = term, and it sets the
// part's entry of the routing table with a write that also compares its
// election key's create revision with the term, so a deposed scheduler's
// write fails (ErrNotLeader) rather than route the part back to it.
// Resign revokes the lease, so the next standby is elected at once.
// Leader and Observe read who leads.
//
// # Tests
//
// Tests run a real etcd inside the test process through
// go.etcd.io/etcd/server/v3/embed (package etcdtest), not Debian's
// etcd-server as a child process: embed at the client's version (v3.7.3)
// builds with this module's grpc as it is, with and without cgo and with
// the rdma tag, needs nothing installed, and starts in about a second.
// Production points Etcd at an external etcd cluster.
package registry
