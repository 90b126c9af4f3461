#!/usr/bin/env python3
"""Fills a Gantry database with many machines and tasks for the page
benchmark (scripts/bench.sh, section 5): `bench-seed.py DB MACHINES TASKS`.
Rows go straight into the tables, spread over 10 users in 5 groups, with
the admin owning the first ones so the admin's pages hold data too."""
import random
import sqlite3
import sys
import time

db, machines, tasks = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
con = sqlite3.connect(db)
cur = con.cursor()
now = int(time.time())
rng = random.Random(7)
admin_id, admin_group = cur.execute("SELECT id, group_id FROM users WHERE username = 'admin'").fetchone()
image = cur.execute("SELECT id FROM images LIMIT 1").fetchone()[0]
pw = cur.execute("SELECT password_hash FROM users WHERE id = ?", (admin_id,)).fetchone()[0]
users = [(admin_id, admin_group)]
for g in range(5):
    cur.execute("INSERT OR IGNORE INTO groups (name, gpu_quota, created_at) VALUES (?, 8, ?)", (f"bench-g{g}", now))
    gid = cur.execute("SELECT id FROM groups WHERE name = ?", (f"bench-g{g}",)).fetchone()[0]
    for u in range(2):
        cur.execute("INSERT OR IGNORE INTO users (username, password_hash, role, group_id, created_at) VALUES (?, ?, 'user', ?, ?)",
                    (f"bench-u{g}{u}", pw, gid, now))
        users.append((cur.execute("SELECT id FROM users WHERE username = ?", (f"bench-u{g}{u}",)).fetchone()[0], gid))
states = ["running", "stopped", "failed", "deleted"]
ids = []
for i in range(machines):
    uid, gid = users[0] if i < 20 else rng.choice(users)
    cur.execute("INSERT INTO machines (name, owner_id, group_id, image_id, gpu_count, gpu_model, volume_name, volume_size_gb, state, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, 1, 'SIM-A100-80GB', ?, 10, ?, ?, ?)",
                (f"bench-m{i}", uid, gid, image, f"bench-vol-{i}", rng.choice(states), now, now))
    ids.append((cur.lastrowid, f"bench-m{i}", uid, gid))
kinds = ["create", "restart", "reinstall", "delete"]
for i in range(tasks):
    mid, name, uid, gid = ids[i % len(ids)] if i >= 200 else ids[i % min(20, len(ids))]
    cur.execute("INSERT INTO tasks (kind, machine_id, machine_name, requester_id, group_id, state, progress, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, 'succeeded', 100, ?, ?)", (rng.choice(kinds), mid, name, uid, gid, now, now))
con.commit()
print(f"seeded {machines} machines and {tasks} tasks")
