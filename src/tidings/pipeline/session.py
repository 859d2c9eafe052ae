"""The SparkSession, built from explicit options: local by default, any `--master` given.

No Maven packages are asked for, so the job needs no network; Java is checked first so
that a missing or old runtime is one clear line, not a py4j traceback.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tidings.errors import ErrorCode, TidingsError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql._typing import OptionalPrimitiveType

# Local files without Hadoop's .crc companions: each micro-batch writes small checkpoint
# files (offsets, commits, the file source's log), and checksumming them took half of those
# steps' time here.
RAW_LOCAL_FILES: dict[str, OptionalPrimitiveType] = {
    "spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}
JAVA_HINT = "Spark needs Java 17 or 21: apt-get install openjdk-17-jre-headless"


def java_major(version_text: str) -> int | None:
    """The major version from `java -version` output (`"17.0.15"`, `"1.8.0_392"`)."""
    found = re.search(r'version "(\d+)(?:\.(\d+))?', version_text)
    if found is None:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def check_java() -> None:
    """Raise a one-line error when Java is missing or older than 17."""
    java = shutil.which("java")
    if java is None:
        raise TidingsError(ErrorCode.UNAVAILABLE, detail=f"java was not found. {JAVA_HINT}")
    shown = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    major = java_major(shown.stderr + shown.stdout)
    if major is None or major < 17:
        raise TidingsError(
            ErrorCode.UNAVAILABLE, detail=f"java {major or '?'} is too old. {JAVA_HINT}"
        )


LOG4J = Path(__file__).with_name("log4j2.properties")


def session_options(master: str, shuffle_partitions: int, interactive: bool) -> dict[str, str]:
    """The session's settings: quiet logs, a local driver bound to loopback, Spark's own
    progress bar on a terminal."""
    options = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if interactive else "false",
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG4J}",
    }
    if master.startswith("local"):  # nothing listens beyond this machine
        options |= {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    return options


def build_session(
    master: str = "local[2]",
    app_name: str = "tidings-pipeline",
    shuffle_partitions: int = 4,
    console_progress: bool | None = None,
) -> SparkSession:
    """A SparkSession for the pipeline's jobs (reused if one is already running). Spark's
    own progress bar shows on a terminal unless `console_progress` is False (the CLI draws
    its own)."""
    check_java()
    # PySpark starts local Python workers with $PYSPARK_PYTHON (default `python3`), not the
    # `spark.pyspark.python` setting: without this they cannot import tidings from a venv.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # no "resolves to loopback" line
    from pyspark.sql import SparkSession

    interactive = sys.stderr.isatty() if console_progress is None else console_progress
    options = session_options(master, shuffle_partitions, interactive)
    builder = SparkSession.builder.master(master).appName(app_name)
    session = builder.config(map={**options, **RAW_LOCAL_FILES}).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
