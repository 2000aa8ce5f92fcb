"""The pytest glue behind ``pytest_duplexact.plugin`` (the pytest11 entry module, kept at the
package's top for installed entry points): options, the run's session object and the shared
test body of the suites."""
