"""Logging: the Logger, log levels and the LoggerDestination base."""

from composer.core.logging.logger import LogData, Logger, LoggerDestination, LogLevel

__all__ = ["LogData", "LogLevel", "Logger", "LoggerDestination"]
