"""One folder per verb of ``gym eval``: its ``command`` (the arguments and what is printed; the
``cli`` layer), its ``use_case`` (a library function that returns data; the ``library`` layer) and
what only that verb uses (its scripts, rules and pages). What several verbs share stays beside
``verbs``: the records, results, comparison and statistics, the library's shared use cases."""
