"""A watcher replica: shares the registered clusters with other replicas through Redis leases.

Each cluster's lease (`keys.lease`, a common.index.lease.Lease under the replica's token) is renewed
every tick, all in one round trip, and released on hand-over. A replica that dies stops
renewing, so its replacement takes its clusters over within the lease TTL plus one tick (a
survivor without a replacement, one TTL later: `_present`). Every tick
also follows the registry (`fs:clusters`) and kubeconfig changes, and, while a cluster's watches
are healthy, refreshes its sync status so it is not reported stale. A kubeconfig whose exec
plugin has not run yet is loaded in a thread of its own, and the cluster taken at a later tick:
a slow or hung plugin never holds up the round, nor so the other clusters.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import gc
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import redis
from redis.exceptions import RedisClusterException

from collector.clusters import ClusterSource
from collector.watch import metrics as watch_metrics
from collector.watch.cluster import ClusterWatch
from collector.watch.rbac import RESOURCES
from common import heap, redis_client
from common.errors import FleetscopeError
from common.index import keys, lease, syncstatus
from common.index.write import store, store_events
from common.kinds.registry import KindRegistry
from common.leaf import registry
from common.leaf.client import ClusterConfig, LeafClient
from common.redis_client import text
from common.settings import Settings

log = logging.getLogger(__name__)
TICKS_PER_TTL = 4
CLAIM_TICKS = 4 * TICKS_PER_TTL  # a claim the holder does not let go of is dropped after this
HANDOVER_MAX_S = 20.0  # a leaving replica waits at most this long for its clusters' claimants
LIST_CONCURRENCY = 4
RETIRE_WORKERS = 2  # threads stopping dropped watches (each stop is bounded: ClusterWatch.stop)


def release_memory() -> None:
    """Give back what dropped watches held: a full collection (their rows and watch state hold
    reference cycles, and the watcher's thresholds put one far away, collector.gc_tuning), then
    the C heap's free pages (common.heap). Once after the last of a batch of retirements, not
    per cluster: a full collection walks every live object of the replica."""
    gc.collect()
    heap.trim()


class WatchReplica:
    """`run(stop)` until `stop` is set; `tick()` is one round of leases (tests call it)."""

    def __init__(
        self,
        settings: Settings,
        r: redis.Redis,
        kinds: KindRegistry,
        source: ClusterSource,
        name: str = "",
        reconcile: bool = False,
    ) -> None:
        self.settings, self.r, self.kinds, self.source = settings, r, kinds, source
        self.token = lease.new_token(name or "watcher")
        self.ttl_ms = lease.ttl_ms(settings.watch_lease_ttl_s)
        self.watches: dict[str, ClusterWatch] = {}
        self.make_client: Callable[[str], LeafClient] = self._client
        # Called after every round, failed ones too: a liveness signal that the loop turns
        # (`fleetscope watch --heartbeat-file`), not that Redis or the leaves are well.
        self.after_tick: Callable[[], None] = lambda: None
        self.reconcile = reconcile
        # Lists are the heavy part (a cluster start or relist): a few at a time per replica.
        self.list_slots = threading.BoundedSemaphore(LIST_CONCURRENCY)
        # Clusters claimed from another replica: watched, not written until the lease is ours.
        self.claims: dict[str, ClusterWatch] = {}
        self.claim_ticks: dict[str, int] = {}
        self.live: set[str] = set()  # tokens of the live replicas, as of the last round
        self.departed: set[str] = set()  # replicas that died within a TTL, counted (`_present`)
        self._reconciled_at = float("-inf")
        # Stopping dropped watches, off the round (`drop`): a few threads, however many drop.
        self._retirer = concurrent.futures.ThreadPoolExecutor(
            RETIRE_WORKERS, thread_name_prefix="watch-retire"
        )
        self._retiring: list[concurrent.futures.Future[None]] = []
        self._retire_lock = threading.Lock()
        self._unretired = 0  # retirements submitted and not finished
        self._free_seen: set[str] = set()  # free clusters left to the others last round
        self._started = time.monotonic()
        self._born_ms = int(time.time() * 1000)  # to tell replicas that died before it started
        self._loading: dict[str, _Load] = {}  # exec plugins running (`_client`)

    @property
    def tick_s(self) -> float:
        return self.settings.watch_lease_ttl_s / TICKS_PER_TTL

    def run(self, stop: threading.Event) -> None:
        first = True
        keeper = threading.Thread(
            target=self._keep_leases, args=(stop,), name="watch-leases", daemon=True
        )
        keeper.start()
        try:
            while not stop.is_set():
                try:
                    self.tick()
                    if first:
                        log.info("first round done: watching %d clusters", len(self.watches))
                        first = False
                except (FleetscopeError, redis.RedisError, RedisClusterException) as e:
                    log.warning("watcher tick failed: %s", e)
                except Exception:  # a bug must not end the rounds: the leases would lapse
                    log.exception("watcher round failed")
                self.after_tick()
                stop.wait(self.tick_s)
        finally:
            self.close()

    def _keep_leases(self, stop: threading.Event) -> None:
        """Renew the held leases every tick, apart from the round (which, taking or handing
        over many clusters on a busy machine, may outlast a TTL): a watch whose lease is gone
        is marked lost, and the round drops it."""
        while not stop.wait(self.tick_s):
            try:
                held = list(self.watches.items())
            except RuntimeError:  # changed while copied: next time
                continue
            try:
                self._announce()
                renewed = lease.renew_all(self.r, [self._lease(name) for name, _ in held])
            except redis_client.ERRORS as e:
                log.warning("could not renew the watch leases: %s", e)
                continue
            for (name, watch), ok in zip(held, renewed, strict=True):
                # expired but not taken (a pause past the TTL): nobody else wrote; keep it
                if not ok and self.watches.get(name) is watch and not self._lease(name).acquire():
                    watch.lost = True

    def tick(self) -> None:
        replicas = self._present()  # just before the leases: it lapses no later than they do
        lost = self._renew_all()  # in one round trip: the leases matter most
        if (
            self.reconcile
            and time.monotonic() - self._reconciled_at > self.settings.registry_interval_s
        ):
            registry.reconcile(self.r, self.source.claims(refresh=True))
            self._reconciled_at = time.monotonic()
        registered = set(syncstatus.registered_clusters(self.r))
        configs = self.source.configs()
        for name, watch in list(self.watches.items()):
            # Not in `configs` may also mean it left the registry between the two reads (the
            # source re-reads it): then its rows go too, or nobody would ever delete them.
            if name not in registered or (
                name not in configs and not self.r.hexists(keys.CLUSTERS, name)
            ):
                # Released first: a write the stopping watch still makes then fails its fence
                # instead of landing after the delete.
                self.drop(name, release=True, purge=True)
                if not self.r.hexists(keys.CLUSTERS, name):
                    store.delete_cluster(self.r, name)
            elif configs.get(name) is not watch.client.config:
                self.drop(name, release=True)
            elif watch.lost or name in lost:
                log.warning("lost the watch lease", extra={"cluster": name})
                watch_metrics.LEASES_LOST.inc()
                self.drop(name, release=False)
        self._heartbeats()
        eligible = sorted(c for c in registered if c in configs)
        share = -(-len(eligible) // replicas)  # each replica's fair share, rounded up
        self._follow_claims(eligible, configs)
        self._give_back(share)
        # A cluster nobody holds is taken up to this replica's share at once, and beyond it
        # once it stayed free for a round (the others had their turn: unwatched is worse than
        # uneven, and a start shared evenly spares hand-overs, each a second list), unless
        # another replica claimed it: its holder let go of it for that one.
        others = [c for c in eligible if c not in self.watches and c not in self.claims]
        claimed = redis_client.mget(self.r, [keys.handover(c) for c in others]) if others else []
        seen, self._free_seen = self._free_seen, set()
        # Not beyond the share while a departed replica still counts: its replacement takes them.
        beyond = not self.departed
        for name, claim in zip(others, claimed, strict=True):
            mine = claim is None or text(claim).split(" ")[0] == self.token
            room = len(self.watches) + len(self.claims) < share or (beyond and name in seen)
            if mine and room and self._lease(name).acquire():
                self._take(name)
            elif mine and not room:
                self._free_seen.add(name)
        if len(self.watches) + len(self.claims) < share and self._settled():
            self._claim(eligible, share)
        watch_metrics.LEASES.set(len(self.watches))
        watch_metrics.BUILT.set(sum(1 for w in self.watches.values() if w.built))

    # -- sharing the fleet: presence, fair shares, and hand-over without a gap ----------------
    #
    # Each replica holds about clusters / replicas. One below its share claims a cluster of a
    # replica above it (`keys.handover`), lists and watches it without writing, says `ready`;
    # the holder then lets go of it (releases the lease), and the claimant takes the lease and
    # writes what it read meanwhile: the cluster is never without a watch, and its writes stay
    # fenced by the lease throughout.

    def _present(self) -> int:
        """Announce this replica; how many replicas share the fleet: the live ones (their tokens
        in `self.live`) and those that died (`self.departed`: their presence lapsed within the
        last TTL; a clean stop removes it) while this replica ran. A dead replica is most often
        being replaced (a Deployment's kubelet starts another), and its replacement may not
        have announced itself yet when the dead one's leases lapse: a survivor counting itself
        alone would take the whole fleet, and the replacement then claim its share back,
        listing each of those clusters a second time. Counting the dead one for one more TTL
        leaves its clusters to the replacement, which does not count it (it started after the
        dead one's last announcement: it stands in for it); a replica gone for good is taken
        one TTL later."""
        now = int(time.time() * 1000)
        pipe = self._announce(execute=False)
        pipe.zremrangebyscore(keys.WATCHERS, "-inf", f"({now - self.ttl_ms}")
        pipe.zrange(keys.WATCHERS, 0, -1, withscores=True)
        entries = [(text(t), score) for t, score in pipe.execute()[-1]]
        self.live = {t for t, score in entries if score >= now}
        # its last announcement (its score less a TTL) came after this replica started
        self.departed = {
            t for t, score in entries if score < now and score - self.ttl_ms >= self._born_ms
        }
        return max(1, len(self.live) + len(self.departed))

    def _announce(self, execute: bool = True) -> Any:
        """Say this replica is live until one lease TTL from now. It is said just before the
        leases are renewed (by the round and by `_keep_leases`), so a replica that dies stops
        counting no later than its leases lapse: whoever takes its clusters as free then counts
        the replicas that are really left, and takes its whole share at once."""
        pipe = self.r.pipeline(transaction=False)
        pipe.zadd(keys.WATCHERS, {self.token: int(time.time() * 1000) + self.ttl_ms})
        if execute:
            pipe.execute()
        return pipe

    def _settled(self) -> bool:
        """Whether this replica has run for one lease TTL. Before that, a replica killed just
        before it started may still count as live (it announced itself until one TTL from its
        last round), and the shares would be computed over too many replicas: a replica taking
        a killed one's place would claim clusters from the healthy survivor, which would list
        them twice, instead of waiting for the dead one's clusters to come free."""
        return time.monotonic() - self._started >= self.settings.watch_lease_ttl_s

    def _claim(self, eligible: list[str], share: int) -> None:
        """Claim clusters of replicas holding more than `share` until this one holds its share."""
        if not eligible:
            return
        holders = redis_client.mget(self.r, [keys.lease(c) for c in eligible])
        held: dict[str, list[str]] = {}
        for c, h in zip(eligible, holders, strict=True):
            if h is not None and text(h) != self.token:
                held.setdefault(text(h), []).append(c)
        for holder, clusters in sorted(held.items(), key=lambda kv: -len(kv[1])):
            # what is above the holder's share; all of a replica that is leaving
            above = clusters[share:] if holder in self.live else clusters
            for c in reversed(above):
                if len(self.watches) + len(self.claims) >= share:
                    return
                if c in self.claims or not self.r.set(
                    keys.handover(c), self.token, nx=True, px=self.ttl_ms
                ):
                    continue  # another replica claimed it first
                self._take(c, claimed_from=holder)

    def _follow_claims(self, eligible: list[str], configs: Mapping[str, object]) -> None:
        """Claimed clusters: say `ready` once listed, take the lease once the holder let go,
        give up after `CLAIM_TICKS` rounds (the holder did not let go) or when gone."""
        for name, watch in list(self.claims.items()):
            self.claim_ticks[name] = self.claim_ticks.get(name, 0) + 1
            if name not in eligible or configs.get(name) is not watch.client.config:
                self._abandon(name)
            elif self._lease(name).acquire():
                self.watches[name] = watch
                del self.claims[name]
                self.claim_ticks.pop(name, None)
                watch.open_gate()
                self.r.delete(keys.handover(name))
                log.info("took over", extra={"cluster": name})
            elif self.claim_ticks[name] > CLAIM_TICKS:
                self._abandon(name)
            else:
                ready = f"{self.token} ready" if watch.listed() else self.token
                self.r.set(keys.handover(name), ready, px=self.ttl_ms)

    def _abandon(self, name: str) -> None:
        watch = self.claims.pop(name)
        self.claim_ticks.pop(name, None)
        watch.stop_event.set()
        self._retire(watch)
        self._drop_claim(name)

    def _drop_claim(self, name: str) -> None:
        """Delete this replica's claim on `name` (`<token>` or `<token> ready`), not another's."""
        lease.delete_if(self.r, keys.handover(name), self.token, f"{self.token} ready")

    def _hand_over_all(self) -> None:
        """Leaving while other replicas run: keep the leases until their claims on this one's
        clusters are ready (they watch them), at most `2 x TTL` (and `HANDOVER_MAX_S`); what is
        not claimed by then is released as it is (taken as free at the others' next round)."""
        now_ms = int(time.time() * 1000)
        if not self.watches or not self.r.zcount(keys.WATCHERS, now_ms, "+inf"):
            return
        deadline = time.monotonic() + min(2 * self.settings.watch_lease_ttl_s, HANDOVER_MAX_S)
        log.info("handing %d clusters over before leaving", len(self.watches))
        while self.watches and time.monotonic() < deadline:
            lease.renew_all(self.r, [self._lease(name) for name in self.watches])
            names = sorted(self.watches)
            claims = redis_client.mget(self.r, [keys.handover(c) for c in names])
            for name, claim in zip(names, claims, strict=True):
                if claim is not None and text(claim).endswith(" ready"):
                    self.drop(name, release=True)
            time.sleep(min(0.2, self.tick_s))  # polling the claimants' progress

    def _give_back(self, share: int) -> None:
        """Above `share`: let go of the clusters whose claimant is ready (it watches them)."""
        extra = len(self.watches) - share
        if extra <= 0:
            return
        names = sorted(self.watches)
        claims = redis_client.mget(self.r, [keys.handover(c) for c in names])
        for name, claim in zip(names, claims, strict=True):
            if extra <= 0:
                return
            if claim is not None and text(claim).endswith(" ready"):
                log.info("handing over", extra={"cluster": name})
                self.drop(name, release=True)
                extra -= 1

    def _renew_all(self) -> set[str]:
        """Renew every owned lease (one pipelined round trip); the names whose lease is gone."""
        held = {name: self._lease(name) for name in self.watches}
        renewed = lease.renew_all(self.r, list(held.values()))
        failed = [name for name, ok in zip(held, renewed, strict=True) if not ok]
        # Expired but not taken (this process was paused past the TTL): nobody else wrote, so
        # taking it again keeps the watch instead of relisting the whole cluster.
        return {name for name in failed if not held[name].acquire()}

    def _take(self, name: str, claimed_from: str = "") -> None:
        """Watch `name`: its lease is ours, or (`claimed_from`) another replica's that this one
        claimed: then lists and watches run, writes wait for the lease (`_follow_claims`)."""
        try:
            client = self.make_client(name)
        except FleetscopeError as e:
            level = logging.DEBUG if isinstance(e, _Loading) else logging.WARNING
            log.log(level, "cannot watch: %s", e, extra={"cluster": name})
            self._let_go(name, claimed_from)
            return
        try:
            watch = ClusterWatch(
                self.r,
                client,
                self.kinds,
                self.settings,
                self.fence(name),
                self.list_slots,
                gated=bool(claimed_from),
                # Free (its holder died, left or lost it): nobody writes it any more, so the
                # watches resume from what the last holder stored; claimed: its holder still
                # writes.
                resume=not claimed_from,
            )
        except OSError as e:  # its TLS material unreadable (ssl.SSLError is one): next round
            log.warning("cannot watch: %s", str(e)[:200], extra={"cluster": name})
            self._let_go(name, claimed_from)
            return
        if claimed_from:
            self.claims[name] = watch
            log.info("claimed from %s", claimed_from, extra={"cluster": name})
        else:
            self.watches[name] = watch
            log.info("watching", extra={"cluster": name})
        watch.start()

    def _let_go(self, name: str, claimed_from: str) -> None:
        """Not watching `name` after all: drop this replica's claim on it, or release its lease
        (a later round takes it again)."""
        if claimed_from:
            self._drop_claim(name)
        else:
            self._lease(name).release()

    def _client(self, name: str) -> LeafClient:
        config = self.source.configs()[name]
        if config.runs_plugin and not config.loaded:
            loading = self._loading.get(name)
            if loading is not None and not loading.is_alive():
                del self._loading[name]
                if loading.error is not None:
                    raise loading.error  # failed: said once, tried again next round
            if name not in self._loading:
                self._loading[name] = _Load(config)
            raise _Loading(f"cluster {name}: its exec plugin is still running; taken when done")
        self._loading.pop(name, None)
        pool = len(self.kinds) + len(RESOURCES) + 2  # one streaming connection per resource
        s = self.settings
        return LeafClient(config, s.leaf_timeout_s, s.leaf_page_size, pool_size=pool)

    def _lease(self, name: str) -> lease.Lease:
        return lease.Lease(self.r, keys.lease(name), self.token, self.ttl_ms)

    def fence(self, name: str) -> lease.Fence:
        return self._lease(name).fence

    def _heartbeats(self) -> None:
        """Every healthy cluster's heartbeat, in one round trip (fenced by its lease)."""
        held = list(self.watches.items())
        beats = [
            store_events.Beat(name, self.fence(name), w.healthy(), w.rbac_healthy())
            for name, w in held
        ]
        for (_name, watch), ok in zip(held, store_events.heartbeats(self.r, beats), strict=True):
            if not ok:
                watch.lost = True

    def drop(self, name: str, release: bool, purge: bool = False) -> None:
        """Stop watching `name` (and release its lease): its threads are joined off this loop,
        whose round must stay short (every lease is renewed in it). Releasing first is safe:
        every write is fenced by the lease."""
        watch = self.watches.pop(name)
        watch.stop_event.set()
        if release:
            self._lease(name).release()
        self._retire(watch, name if purge else None)
        log.info("stopped watching", extra={"cluster": name})

    def _retire(self, watch: ClusterWatch, purge: str | None = None) -> None:
        """Stop `watch` off the round; `purge`: a cluster that left the registry, whose keys
        are deleted again once its watch has stopped (what its last writes put back)."""
        with self._retire_lock:
            self._unretired += 1

        def retire() -> None:
            try:
                watch.stop()
                watch.client.close()
                if purge is not None and not self.r.hexists(keys.CLUSTERS, purge):
                    store.delete_cluster(self.r, purge)
            finally:
                with self._retire_lock:
                    self._unretired -= 1
                    last = not self._unretired
                if last:
                    release_memory()

        done = self._retirer.submit(retire)
        self._retiring = [x for x in self._retiring if not x.done()] + [done]

    def close(self) -> None:
        """Stop every watch and release the leases (a clean hand-over, no TTL wait)."""
        watch_metrics.LEASES.set(0)
        watch_metrics.BUILT.set(0)
        for name in list(self.claims):
            with contextlib.suppress(*redis_client.ERRORS):  # else the claim expires
                self._abandon(name)
        with contextlib.suppress(*redis_client.ERRORS):  # else its presence expires
            self.r.zrem(keys.WATCHERS, self.token)
            self._hand_over_all()
        for watch in self.watches.values():
            watch.stop_event.set()  # all at once; the joins below then take one wait at most
        for name in list(self.watches):
            try:
                self.drop(name, release=True)
            except redis_client.ERRORS:
                log.warning("could not release a lease; it expires", extra={"cluster": name})
        for done in self._retiring:  # each stop is bounded (ClusterWatch.stop)
            if (e := done.exception()) is not None:
                log.warning("could not stop a watch: %s", e)
        self._retirer.shutdown()


class _Loading(FleetscopeError):
    """A cluster's exec plugin runs in the background: not taken this round."""


class _Load(threading.Thread):
    """Loads a kubeconfig (runs its exec plugin) off the replica's loop; keeps its error."""

    def __init__(self, config: ClusterConfig) -> None:
        super().__init__(name=f"{config.name}:credentials", daemon=True)
        self.config = config
        self.error: FleetscopeError | None = None
        self.start()

    def run(self) -> None:
        try:
            self.config.configuration()
        except FleetscopeError as e:
            self.error = e
