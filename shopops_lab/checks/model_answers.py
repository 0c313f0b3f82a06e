# ruff: noqa: E501  (the masters' own lines, as they are)
"""The model answers `Exercise.solution(confirm=True)` reveals, by exercise id.

Made from the masters' answer cells by `python -m shopops_lab.course.grade.key solutions/`;
a test keeps it equal to them. Never edit it by hand."""

MODEL_ANSWERS: dict[str, str] = {
    '00.1': (
        'def enqueue_first_case(queue):\n'
        '    """Put case O-1001 (store_northline, contact_send) on `queue`; return its item id."""\n'
        '    return queue.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send")'
    ),
    '01.1': (
        'def send_followup(lease, adapter):\n'
        '    """Email the customer of this contact_send item through `adapter`. It may run more than\n'
        '    once for the same item; the customer must hear from us once per email."""\n'
        '    return adapter.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"],\n'
        '                        body=f"About your order {lease.case_id}: the carrier is late, and we are sorry.")'
    ),
    '01.2': (
        'def force_expiry(queue, clock, handle):\n'
        '    """Stall a worker past its lease on the virtual clock, and show the item redelivered.\n'
        '    Return (first, second): the first worker\'s lease and the redelivery\'s."""\n'
        '    first = queue.acquire("W1")\n'
        '    handle(first)                                  # W1 emails Jordan, then stalls: no ack\n'
        "    clock.advance(queue.lease_seconds)             # the lease's deadline passes on the queue's clock\n"
        '    second = queue.acquire("W7")                   # the same item, a new token, attempt 2\n'
        '    handle(second)\n'
        '    queue.ack(second)\n'
        '    return first, second'
    ),
    '01.3': (
        'def what_can_happen_next():\n'
        '    """The labels of every option that can happen once W1\'s lease runs out while W1 still works."""\n'
        '    return {"redelivered", "late_ack_refused", "w1_still_sends"}'
    ),
    '02.1': (
        'def replay_and_drain(queue, handler):\n'
        '    """After a fix: replay every dead item once, then process until the queue is empty."""\n'
        '    for item in queue.dlq_items():\n'
        '        queue.replay_dlq(item.id)\n'
        '    while queue.process_one("W1", handler) != "empty":\n'
        '        pass'
    ),
    '02.2': (
        'def where_does_it_end(deliveries, max_attempts):\n'
        '    """The item\'s final state ("ready", "done" or "dead") after these deliveries."""\n'
        '    for attempt, outcome in enumerate(deliveries, start=1):\n'
        '        if outcome == "ok":\n'
        '            return "done"\n'
        '        if attempt == max_attempts:\n'
        '            return "dead"\n'
        '    return "ready"'
    ),
    '03.1': (
        'def choose_policy():\n'
        '    """The lease policy for a worker whose drafting call may take up to 120 s."""\n'
        '    return HeartbeatPolicy(ttl=60, heartbeat_interval=15, missed_tolerance=2)'
    ),
    '03.3': (
        'def draft_with_heartbeats(lease, queue, model, email):\n'
        '    """Draft Jordan\'s email chunk by chunk, keeping the lease; send and ack only if it held."""\n'
        '    draft = []\n'
        '    while (chunk := model.next_chunk()) is not None:\n'
        '        draft.append(chunk)\n'
        '        if not queue.heartbeat(lease):   # the lease is gone: whatever follows belongs to someone else\n'
        '            return\n'
        '    email.send(lease.payload["idem_key"], case_id=lease.case_id, to=lease.payload["to"], body="".join(draft))\n'
        '    queue.ack(lease)'
    ),
    '04.1': (
        'class FencedResultStore(NaiveResultStore):\n'
        '    """A result store that accepts a completion only under the job\'s current token."""\n'
        '\n'
        '    def complete(self, job_id, result, *, token, worker_id=None, now=None):\n'
        '        current = self.current_token(job_id)\n'
        '        if token != current:   # before any claim current is None, which no token equals\n'
        '            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)\n'
        '        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)'
    ),
    '04.2': (
        'def rejecting_control():\n'
        '    """The label, from lab04.CONTROLS, of the control that rejects the stale completion."""\n'
        '    return "store_token_check"'
    ),
    '05.1': (
        'def finish_job(jobs, job_id, do_step):\n'
        '    """Claim job_id, run and confirm its steps, complete it; return its state as the store has it."""\n'
        '    try:\n'
        '        claim = jobs.claim(job_id, "W1", lease_seconds=30)\n'
        '        for step_id in ("fetch", "summarize", "publish"):\n'
        '            artifact = do_step(step_id)\n'
        '            jobs.confirm_step(job_id, step_id, token=claim.token)\n'
        '        jobs.complete(job_id, token=claim.token, result=artifact)\n'
        '    except (TransitionError, JobNotRunningError):   # cancelled meanwhile: the store said no, so stop\n'
        '        pass\n'
        '    return jobs.get(job_id).state'
    ),
    '05.2': (
        'def run_with_intent(job_id, env):\n'
        '    """Run or resume job_id to the end with a healthy provider; return the message id of the email."""\n'
        '    token = env.claim(job_id)\n'
        '    cp = env.resume(job_id)\n'
        '    for step in env.workflow.steps:\n'
        '        if step.id in cp.completed:      # decided earlier: reuse it, never redo it\n'
        '            continue\n'
        '        if not step.effect:\n'
        '            cp = env.checkpoints.save(job_id, cp.confirm(step.id, env.make(job_id, step.id)), token=token)\n'
        '            continue\n'
        '        op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)\n'
        '        found = None\n'
        '        if op_id in cp.intents:          # it may have gone out: ask before acting\n'
        '            found = env.lookup(op_id)\n'
        '        else:                            # nothing went out yet: leave a trace first\n'
        '            cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)\n'
        '        if found is None or found.status is SendStatus.FAILED:\n'
        '            reply = env.send(job_id, step.id, op_id, body=cp.artifacts["summarize"])\n'
        '            receipt = Receipt(op_id=op_id, step=step.id, message_id=reply.message_id, via="reply")\n'
        '        else:\n'
        '            receipt = Receipt(op_id=op_id, step=step.id, message_id=found.message_id, via="lookup")\n'
        '        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, receipt.message_id), token=token)\n'
        '    env.ack(job_id, token=token, result=cp.artifacts["publish"])\n'
        '    return cp.artifacts["publish"]'
    ),
    '05.3': (
        'def run(job_id, env):\n'
        '    """Run or resume job_id to the end; return the message id of the email."""\n'
        '    token = env.claim(job_id)            # a restart is a new owner, with a newer token\n'
        '    cp = env.resume(job_id)              # what survived the crash; refuses a changed plan\n'
        '    for step in env.workflow.steps:\n'
        '        if step.id in cp.completed:      # decided earlier: reuse it, never redo it\n'
        '            continue\n'
        '        if not step.effect:\n'
        '            artifact = env.make(job_id, step.id)\n'
        '            cp = env.checkpoints.save(job_id, cp.confirm(step.id, artifact), token=token)\n'
        '            continue\n'
        '        op_id = cp.op_for(step.id) or env.op_id(job_id, step.id)\n'
        '        outcome, via = None, "reply"\n'
        '        if op_id in cp.intents:          # an earlier run may have sent it: ask, do not guess\n'
        '            outcome, via = env.lookup(op_id), "lookup"\n'
        '        else:                            # intent first, so a crash during the send leaves a trace\n'
        '            cp = env.checkpoints.save(job_id, cp.intend(op_id, step.id), token=token)\n'
        '        if outcome is None or outcome.status is SendStatus.FAILED:\n'
        '            outcome, via = env.send(job_id, step.id, op_id, body=cp.artifacts["summarize"]), "reply"\n'
        '        if outcome.status is SendStatus.UNKNOWN:   # delivered or not? the reply was lost\n'
        '            outcome, via = env.lookup(op_id), "lookup"\n'
        '        if outcome.status is not SendStatus.OK:    # certainly not delivered: let the queue retry\n'
        '            raise EffectFailedError(step=step.id, job_id=job_id, status=outcome.status.value, op_id=op_id)\n'
        '        receipt = Receipt(op_id=op_id, step=step.id, message_id=outcome.message_id, via=via)\n'
        '        cp = env.checkpoints.save(job_id, cp.receive(receipt).confirm(step.id, receipt.message_id),\n'
        '                                  token=token)\n'
        '    result = cp.artifacts[env.workflow.steps[-1].id]\n'
        '    env.ack(job_id, token=token, result=result)\n'
        '    return result'
    ),
    '06.1': (
        'def dispatch(outbox, broker):\n'
        '    """One pass: every pending message to the broker, and a note in the outbox for each."""\n'
        '    for message in outbox.pending():       # oldest first\n'
        '        broker.publish(message)            # raises if the broker cannot be reached: the pass stops here\n'
        '        outbox.mark_sent(message.id)       # only after the confirm: a crash just before it costs a duplicate'
    ),
    '06.2': (
        'def handle(delivery, processed, apply):\n'
        '    """Apply one delivery unless its message was applied before; True if applied now."""\n'
        '    if delivery.message_id in processed:   # a copy of a message we already applied\n'
        '        return False\n'
        '    apply(delivery)                        # may raise (a timeout too): nothing recorded, no ack, it comes back,\n'
        '                                           # and the keyed call is safe to make again\n'
        '    processed.add(delivery.message_id)     # only after the effect (in a database: the same transaction)\n'
        '    return True'
    ),
    '07.1': (
        'def my_policy(signals):\n'
        '    """Decide, for a worker about to take work, what it may take now."""\n'
        '    if signals.in_flight >= GATEWAY_CAPACITY:      # full: one more call only slows every call down\n'
        '        return acquire(max_priority=Priority.APPROVAL)\n'
        '    return acquire()'
    ),
    '07.2': (
        'def the_contract():\n'
        '    """The labels, from lab07.PIECES, of the pieces that make up the contract."""\n'
        '    return {"at_least_once_delivery", "idempotency_keys", "fencing_tokens", "checkpoints"}'
    ),
    '07.3': (
        'from collections import Counter\n'
        '\n'
        '\n'
        'def assert_no_double_contact(log):\n'
        '    """Raise AssertionError if this run sent a customer the same message twice."""\n'
        '    sent = Counter((event.case_id, event.info["idem_key"]) for event in log.where("contact_sent"))\n'
        '    twice = sorted(key for key, count in sent.items() if count > 1)\n'
        '    assert not twice, f"{len(twice)} message(s) sent twice, the first: case {twice[0][0]}, key {twice[0][1]}"'
    ),
    '07.4': (
        'import math\n'
        '\n'
        '\n'
        'def vital_signs(log, now):\n'
        '    """The queue\'s vital signs at `now`, from its event log alone."""\n'
        '    enqueued, first_wait, leases, dead_since = {}, {}, {}, {}\n'
        '    for event in log.where():\n'
        '        if event.time > now or event.item_id is None:\n'
        '            continue                         # not yet happened, or about no item\n'
        '        item = event.item_id\n'
        '        if event.kind == "enqueued":\n'
        '            enqueued[item] = event.time\n'
        '        elif event.kind == "leased":\n'
        '            leases[item] = leases.get(item, 0) + 1\n'
        '            first_wait.setdefault(item, event.time - enqueued.get(item, event.time))\n'
        '        elif event.kind == "dead_lettered":\n'
        '            dead_since[item] = event.time\n'
        '        elif event.kind == "replayed":\n'
        '            dead_since.pop(item, None)       # out of the DLQ again\n'
        '    waits = sorted(first_wait.values())\n'
        '    histogram = {}\n'
        '    for item in enqueued:\n'
        '        histogram[leases.get(item, 0)] = histogram.get(leases.get(item, 0), 0) + 1\n'
        '    total = sum(leases.values())\n'
        '    return {\n'
        '        "time_in_queue_p95": waits[math.ceil(0.95 * len(waits)) - 1] if waits else None,\n'
        '        "attempts": histogram,\n'
        '        "dlq_age": max((now - t for t in dead_since.values()), default=None),\n'
        '        "redelivery_rate": (total - len(leases)) / total if total else 0.0,\n'
        '    }'
    ),
    '07.5': (
        'class MyChaosTest:\n'
        '    """A chaos test of your own: the failure it injects, and the promise it checks afterwards."""\n'
        '\n'
        '    def fault(self):\n'
        '        """The failure: a Fault of the simulator\'s, or a list of them."""\n'
        '        return Fault("pause_worker", item="O-1005")   # frozen before its send, past its lease: stale on waking\n'
        '\n'
        '    def invariant(self, log):\n'
        '        """Raise AssertionError if the run in `log` broke the promise the failure puts at risk."""\n'
        '        newest = {}                          # item -> the newest token a lease carried so far\n'
        '        for event in log.where(("leased", "checkpoint_written")):\n'
        '            if event.kind == "leased":\n'
        '                newest[event.item_id] = max(event.token, newest.get(event.item_id, 0))\n'
        '            else:\n'
        '                assert event.token == newest.get(event.item_id), (\n'
        '                    f"{event.worker_id} wrote {event.item_id}\'s checkpoint under token {event.token} at "\n'
        '                    f"t={event.time:g}, after token {newest.get(event.item_id)} was issued")'
    ),
    '08.1': (
        'def handle(lease, shop):\n'
        '    """Refund the order this delivery names: once, however often it is delivered and wherever the worker dies."""\n'
        '    with shop.transaction():      # one commit: the ack and the credit together, or neither\n'
        '        shop.ack(lease)           # first: a stale lease is refused before anything is written\n'
        '        shop.credit(lease.payload["order"], lease.payload["amount"])'
    ),
    '08.2': (
        'def claim_sqlite(db, worker_id, now, lease_seconds):\n'
        '    """Take one claimable item for worker_id; return (item_id, token), or None."""\n'
        '    db.execute("BEGIN IMMEDIATE")        # the write lock before any read: claims take turns\n'
        '    taken = db.execute(\n'
        '        "UPDATE queue SET state = \'leased\', worker_id = ?, token = token + 1, expires_at = ? "\n'
        '        "WHERE id = (SELECT id FROM queue WHERE state = \'ready\' OR (state = \'leased\' AND expires_at <= ?) "\n'
        '        "ORDER BY id LIMIT 1) RETURNING id, token",\n'
        '        (worker_id, now + lease_seconds, now))\n'
        '    db.execute("COMMIT")\n'
        '    return taken[0] if taken else None'
    ),
    '08.3': (
        'def claim_postgres(db, worker_id, now, lease_seconds):\n'
        '    """Take one claimable item for worker_id; return (item_id, token), or None."""\n'
        '    claimable = ("SELECT id FROM queue WHERE state = \'ready\' OR (state = \'leased\' AND expires_at <= %s) "\n'
        '                 "ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED")   # locked till our commit; other claims pass it by\n'
        '    found = db.execute(claimable, (now,))\n'
        '    if not found:\n'
        '        return None\n'
        '    lease = ("UPDATE queue SET state = \'leased\', worker_id = %s, token = token + 1, expires_at = %s "\n'
        '             "WHERE id = %s RETURNING id, token")\n'
        '    (taken,) = db.execute(lease, (worker_id, now + lease_seconds, found[0][0]))\n'
        '    return taken'
    ),
}
