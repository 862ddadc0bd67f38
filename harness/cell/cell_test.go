package cell

import (
	"testing"

	"github.com/ftrace-harness/fth/results"
	"github.com/ftrace-harness/fth/wire/event"
)

func TestAddOracleKeepsSummariesAndBoundedFailures(t *testing.T) {
	var list []event.Oracle
	list = results.AddOracle(list, event.Oracle{Name: event.OracleExact, Function: "f", Expected: 5, Got: 5, OK: true})
	if len(list) != 0 {
		t.Fatalf("a passing single check was kept: %+v", list)
	}
	for range results.MaxOracleFailures + 10 {
		list = results.AddOracle(list, event.Oracle{Name: event.OracleFuncIP, Function: "f", Expected: 1, Got: 2})
	}
	list = results.AddOracle(list, event.Oracle{Name: event.OracleFuncIP, Checks: 100, Failures: 60})
	if len(list) != results.MaxOracleFailures+1 || list[len(list)-1].Checks != 100 {
		t.Errorf("kept %d, want %d failures plus the summary", len(list), results.MaxOracleFailures)
	}
}
