# Gantry: the two commands a newcomer needs.
#   make run   — set up, build (release) and start Gantry on http://127.0.0.1:3000
#   make test  — set up and run every test (unit, SQLite, HTTP, Docker, Chromium)
.PHONY: run test setup build bench clean-data

run: setup
	bash scripts/run.sh

# The set-up is test.sh's first stage (with a time limit, like every stage).
test:
	bash scripts/test.sh

setup:
	bash scripts/setup.sh

build: setup
	cargo leptos build --release --precompress
	cargo build --release --locked -p gantry-bench
	bash scripts/regzip.sh target/site

clean-data:
	bash scripts/juicefs.sh stop data/juicefs data/juicefs-mnt || true
	rm -rf data
