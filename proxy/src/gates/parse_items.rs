//! Gate E0: parsing the items of an extract call.
