package main

// The program is its own example: go test runs main and checks what it
// prints.
func Example() {
	main()
	// Output:
	// [weather: sunny in Paris]
	// ## Weather in Paris
	//
	// *This answer comes from the offline demo model: no model provider is configured, so instead of writing its own analysis it brings together the tool results of this turn.*
	//
	// ### 1. Weather
	//
	// > sunny in Paris
	//
	// ### Conclusion
	//
	// On **weather in Paris**, the weather step added its result. Taken together, these results give a structured view of the question; a configured model provider would weigh them against each other in a real synthesis.
}
