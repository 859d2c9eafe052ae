"""The pipeline's SparkSession settings: a local driver on loopback, quiet logs, progress
only on a terminal."""

from __future__ import annotations

from tidings.pipeline.session import LOG4J, session_options


def test_a_local_driver_binds_loopback_only() -> None:
    options = session_options("local[2]", 4, interactive=False)
    assert options["spark.driver.host"] == options["spark.driver.bindAddress"] == "127.0.0.1"


def test_a_cluster_master_keeps_spark_s_own_choice_of_address() -> None:
    assert "spark.driver.bindAddress" not in session_options("spark://h:7077", 4, False)


def test_spark_logs_errors_only_through_the_shipped_configuration() -> None:
    java = session_options("local[2]", 4, interactive=False)["spark.driver.extraJavaOptions"]
    assert java == f"-Dlog4j2.configurationFile=file:{LOG4J}"
    assert "rootLogger.level = error" in LOG4J.read_text()


def test_the_progress_bar_shows_on_a_terminal_only() -> None:
    def shown(interactive: bool) -> str:
        return session_options("local[2]", 4, interactive)["spark.ui.showConsoleProgress"]

    assert (shown(True), shown(False)) == ("true", "false")
