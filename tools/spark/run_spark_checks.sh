#!/usr/bin/env bash
# Runs the Spark data source's tests (tests/test_integration_spark.py, marker `spark`) on a local
# Spark session and writes what happened to tools/spark/RESULT.txt: versions, the machine's load,
# each test's time and the total, so the cost of running them in CI can be judged.
# Needs PySpark 4 (pip install 'recordkit[spark]') and Java 17 (apt-get install openjdk-17-jre-headless).
# Usage: tools/spark/run_spark_checks.sh [PYTHON]   (default: .venv/bin/python, else python3)
set -uo pipefail
cd "$(dirname "$0")/../.."
PY="${1:-}"
if [ -z "$PY" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
OUT=tools/spark/RESULT.txt
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
{
    echo "# tools/spark/run_spark_checks.sh, $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "python:  $("$PY" -c 'import sys; print(sys.version.split()[0])')"
    echo "pyspark: $("$PY" -c 'import pyspark; print(pyspark.__version__)' 2>&1 | tail -1)"
    echo "pyarrow: $("$PY" -c 'import pyarrow; print(pyarrow.__version__)' 2>&1 | tail -1)"
    echo "java:    $(java -version 2>&1 | head -1)"
    echo "cores:   $(nproc); load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    start=$(date +%s.%N)
    "$PY" -m pytest -q -p no:cacheprovider -m spark tests/test_integration_spark.py --durations=0 2>&1 \
        | grep -v -e FutureWarning -e require_minimum_pandas_version -e '^  warnings.warn'
    rc=${PIPESTATUS[0]}
    end=$(date +%s.%N)
    echo
    echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "wall time of the pytest run: $("$PY" -c "print(round($end - $start, 1))") s; exit status $rc"
} > "$OUT" 2>&1
cat "$OUT"
exit "$(grep -o 'exit status [0-9]*' "$OUT" | tail -1 | cut -d' ' -f3)"
